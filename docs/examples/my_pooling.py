"""Two max pooling gradients as people write them by hand, as poolgrad targets:

    poolgrad --target my_pooling:argmax_first --target my_pooling:all_maxima \
        -k "max_pool1d and ties"          # with this directory on PYTHONPATH

Both loop over the windows and send each window's upstream gradient to its maximum; they differ
only in which maximum a tie gets. ``argmax_first`` routes to the first one (numpy.argmax), which
is the spec's canonical rule; ``all_maxima`` routes to every element equal to the maximum (a
mask), which poolgrad names ``tie=all``. Both support unpadded, undilated max pooling of any
rank and raise NotImplementedError for the rest, which poolgrad reports as unsupported.
"""

import numpy as np


def argmax_first(spec, x, grad_output):
    def first_maximum(window):
        mask = np.zeros(window.shape, dtype=bool)
        mask.flat[np.argmax(window)] = True   # numpy's argmax: the first maximum, or the first NaN
        return mask
    return _max_pool(spec, x, grad_output, first_maximum)


def all_maxima(spec, x, grad_output):
    return _max_pool(spec, x, grad_output, lambda window: window == np.max(window))


def _max_pool(spec, x, grad_output, route):
    """Forward max and the gradient ``route`` gives each window (a mask of the window's shape)."""
    if spec["op"].rstrip("123d") != "max_pool":
        raise NotImplementedError(f"{spec['op']}: only max pooling")
    padding, rank = spec.get("padding", 0), x.ndim - 2
    if padding != "VALID" and (isinstance(padding, str) or np.any(np.asarray(padding))):
        raise NotImplementedError(f"padding {padding!r}: only unpadded windows")
    if np.any(np.asarray(spec.get("dilation", 1)) != 1) or spec.get("ceil_mode"):
        raise NotImplementedError("dilation and ceil_mode are not implemented")
    kernel = np.broadcast_to(spec["kernel_size"], (rank,))
    stride = np.broadcast_to(spec.get("stride") or spec["kernel_size"], (rank,))
    out = [(length - k) // s + 1 for length, k, s in zip(x.shape[2:], kernel, stride)]
    forward = np.empty((*x.shape[:2], *out), dtype=x.dtype)
    grad_input = np.zeros_like(x)
    for index in np.ndindex(*forward.shape):
        window = (*index[:2], *(slice(p * s, p * s + k) for p, s, k in zip(index[2:], stride, kernel)))
        forward[index] = np.max(x[window])
        grad_input[window] += route(x[window]).astype(x.dtype) * grad_output[index]
    return forward, grad_input
