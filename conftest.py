"""poolgrad's pytest plugin: options, target discovery, result collection, report at exit.

Kept at the checkout root so that ``pytest`` there is the whole suite.
"""
