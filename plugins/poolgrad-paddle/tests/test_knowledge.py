"""The plugin's knowledge base and reproducer: read by poolgrad as a plugin's files are."""

from __future__ import annotations

import pytest

from poolgrad.knowledge import sources
from poolgrad.reports import plugin_checks


def test_poolgrads_knowledge_base_holds_the_plugins_findings():
    plugin_checks.assert_the_knowledge_base_holds_its_findings("paddle")


def test_a_finding_of_older_releases_is_bounded_by_the_lanes_history():
    """float16 pool2d/pool3d kernels came with 3.3.1: the 3.0.0 lane holds the finding, the 3.3.1
    lane contradicts it, so the knowledge base scopes it to older releases."""
    f = next(f for f in sources.load() if f.id == "paddle-cpu-pool-float16-no-kernel")
    assert str(f.versions) == "<3.3.1"


def test_each_example_is_a_case_file_naming_its_finding():
    plugin_checks.assert_each_example_is_a_case_file_naming_its_finding("paddle")


@pytest.mark.parametrize("variant", ["eager", "channels_last", "return_mask", "to_static"])
def test_the_reproducer_reprints_what_the_adapter_computed(variant, tmp_path):
    pytest.importorskip("paddle")
    plugin_checks.assert_the_reproducer_reprints_what_the_adapter_computed("paddle", variant, tmp_path)
