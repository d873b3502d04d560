"""poolgrad: the conformance suite for pooling forward and gradients across PyTorch,
TensorFlow and JAX.

Installed, it is a pytest plugin (the ``pytest11`` entry point ``poolgrad.plugin``) and a
conformance suite that runs from any directory: ``pytest --pyargs poolgrad`` or the
``poolgrad`` command (``poolgrad.cli``) run the catalogue against the frameworks installed.
"""
