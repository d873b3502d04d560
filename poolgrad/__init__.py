"""poolgrad: the conformance suite for pooling forward and gradients across frameworks: those
built in (poolgrad/adapters/) and those that plugin distributions register.

Installed, it is a pytest plugin (the ``pytest11`` entry point ``poolgrad.plugin``) and a
conformance suite that runs from any directory: ``pytest --pyargs poolgrad`` or the
``poolgrad`` command (``poolgrad.cli``) run the catalogue against the frameworks installed.

PYTEST_DONT_REWRITE: pytest rewrites the asserts of a plugin's whole package, and warns where
its top module was imported first, as the ``poolgrad`` command imports it; this module has no
code to rewrite, and the modules under it are rewritten as they are imported.
"""
