"""The plugin's knowledge base and reproducer: read by poolgrad as a plugin's files are."""

from __future__ import annotations

import pytest

from poolgrad.reports import plugin_checks


def test_poolgrads_knowledge_base_holds_the_plugins_findings():
    plugin_checks.assert_the_knowledge_base_holds_its_findings("mlx")


def test_each_example_is_a_case_file_naming_its_finding():
    plugin_checks.assert_each_example_is_a_case_file_naming_its_finding("mlx")


# bfloat16 and float64 take the reproducer's own conversions (float32 holds bfloat16 exactly;
# mx.array makes float64 float32 without the dtype)
@pytest.mark.parametrize("variant, dtype", [("eager", "bfloat16"), ("compile", "float64")])
def test_the_reproducer_reprints_what_the_adapter_computed(variant, dtype, tmp_path):
    pytest.importorskip("mlx.core")
    plugin_checks.assert_the_reproducer_reprints_what_the_adapter_computed("mlx", variant, tmp_path, dtype)
