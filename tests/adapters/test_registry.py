"""Frameworks are plugins: the poolgrad.adapters entry points name light records, a package
registers a framework without changing poolgrad, and the pytest process imports none."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import numpy as np
import pytest

from poolgrad.adapters import keras, registry
from poolgrad.adapters import torch as torch_planner
from poolgrad.adapters.base import OK, Keywords, Target
from poolgrad.adapters.pool import WorkerPool
from fake_frameworks import PLUGIN, SPEC, Options, case
from poolgrad.reference import backward
from poolgrad.suite import options


def entry_point(name: str, value: str):
    return importlib.metadata.EntryPoint(name=name, value=value, group=registry.ENTRY_POINTS)


def test_the_built_in_frameworks_register_through_the_entry_point_group():
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=registry.ENTRY_POINTS)}
    assert eps.items() >= {"torch": "poolgrad.adapters.torch:FRAMEWORK", "tensorflow": "poolgrad.adapters.tensorflow:FRAMEWORK",
                           "jax": "poolgrad.adapters.jax:FRAMEWORK"}.items(), "reinstall: pip install --no-deps -e ."
    assert registry.discover() == {name: registry.FRAMEWORKS[name] for name in eps}


def test_a_package_registers_a_framework_and_its_targets_are_collected(monkeypatch):
    builtin = list(importlib.metadata.entry_points(group=registry.ENTRY_POINTS))
    plugin = entry_point("plugin", "fake_frameworks:PLUGIN")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [*builtin, plugin])
    monkeypatch.setattr(registry, "FRAMEWORKS", registry.discover())
    assert registry.FRAMEWORKS["plugin"] is PLUGIN
    targets, missing = options.selected_targets(Options(frameworks="plugin"))
    assert [t.id for t in targets] == ["plugin-eager-cpu", "plugin-compiled-cpu"] and missing == []
    x, g = case(0)
    pool = WorkerPool(start_timeout_s=60)
    try:
        [outcome] = pool.run_group(targets[0], SPEC, [x], [g], 20.0)
    finally:
        pool.close()
    assert outcome.status == OK, outcome.message
    np.testing.assert_array_equal(outcome.grad_input, backward(SPEC, x, g))


@pytest.mark.parametrize("value, name, says", [
    ("fake_frameworks:SPEC", "spec", "names a PoolSpec; point it at a poolgrad.adapters.framework.Framework"),
    ("fake_frameworks:PLUGIN", "other", "the record's name is 'plugin'; name the entry point after its framework"),
    ("poolgrad.adapters.torch:FRAMEWORK", "torch", "framework 'torch' is registered twice"),
    ("poolgrad.adapters.registry:USER", "user", "'user' is reserved for --target kernels"),
])
def test_a_bad_registration_is_refused_naming_the_entry_point_and_the_fix(value, name, says):
    with pytest.raises(registry.RegistrationError) as e:
        registry.discover([entry_point("torch", "poolgrad.adapters.torch:FRAMEWORK"), entry_point(name, value)])
    assert f"entry point {name!r} = {value!r}" in str(e.value) and says in str(e.value)


def test_a_planner_returns_a_plan_and_anything_else_is_refused_naming_it_and_the_fix(monkeypatch):
    target = Target("torch", "eager", "cpu")
    planned = registry.plan(target, SPEC, (1, 2, 4, 4))
    assert isinstance(planned, Keywords) and planned == {"kernel_size": (2, 2), "stride": (2, 2), "ceil_mode": False,
                                                        "padding": (0, 0), "dilation": (1, 1)}
    monkeypatch.setattr(torch_planner, "plan", lambda spec, variant, shape: dict(planned))
    with pytest.raises(TypeError, match=r"poolgrad.adapters.torch.plan \(torch eager\) returned a dict: return a "
                                        r"poolgrad.adapters.base.Plan \(Keywords\(kwargs\)"):
        registry.plan(target, SPEC, (1, 2, 4, 4))


def test_no_registered_framework_is_a_usage_error_saying_to_install(monkeypatch):
    monkeypatch.setattr(registry, "FRAMEWORKS", {})
    with pytest.raises(pytest.UsageError, match="no framework adapters are registered .* pip install -e ."):
        options.selected_targets(Options())


def test_keras_is_a_variant_of_each_backend_with_a_worker_of_its_own():
    for name in ("torch", "tensorflow", "jax"):
        fw = registry.FRAMEWORKS[name]
        assert "keras" in fw.variants and fw.worker("eager").name == name
        assert fw.worker("keras") == registry.WorkerSpec(f"{name}-keras", "poolgrad.adapters.keras.adapter",
                                                         {"KERAS_BACKEND": name}, "keras", "poolgrad.adapters.keras",
                                                         keras.UPSTREAM)  # reported to Keras, whatever the backend


def test_reading_the_registry_and_selecting_targets_imports_no_framework():
    code = ("import sys; from poolgrad.adapters import registry; from poolgrad.suite import options; from poolgrad.reference import PoolSpec; "
            "registry.discover(); options.user_targets(['numpy:mean']); "
            "[registry.plan(t, PoolSpec.from_dict(s), (1, 1, 4, 4)) for t in registry.all_targets() "
            "for s in ({'op': 'max_pool', 'kernel_size': [2, 2]}, {'op': 'adaptive_avg_pool', 'output_size': [3, 3]})]; "
            "print(sorted({'torch', 'tensorflow', 'jax', 'keras'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr
