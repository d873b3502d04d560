"""The plugin's knowledge base and reproducer: read by poolgrad as a plugin's files are."""

from __future__ import annotations

import pytest

from poolgrad.reports import plugin_checks


def test_poolgrads_knowledge_base_holds_the_plugins_findings():
    plugin_checks.assert_the_knowledge_base_holds_its_findings("tinygrad")


def test_each_example_is_a_case_file_naming_its_finding():
    plugin_checks.assert_each_example_is_a_case_file_naming_its_finding("tinygrad")


@pytest.mark.parametrize("variant", ["jit", "gradient"])  # backward under TinyJit; Tensor.gradient
def test_the_reproducer_reprints_what_the_adapter_computed(variant, tmp_path):
    pytest.importorskip("tinygrad")
    plugin_checks.assert_the_reproducer_reprints_what_the_adapter_computed("tinygrad", variant, tmp_path, "float64")
