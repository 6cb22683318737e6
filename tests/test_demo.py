"""The demo's verdict on the order of each example's solution and template (the whole demo runs
in tests/test_cli_db.py)."""

from __future__ import annotations

from cluster_manager.cli.demo_run import order_line


def test_a_solution_ahead_of_its_template_is_confirmed_with_both_scores():
    assert order_line("identity_py", "CPU", 12.3e-6, 45.6e-6) == (
        "identity_py: solution 12.3 µs ranks ahead of template 45.6 µs on CPU ✓",
        True,
    )


def test_a_solution_level_with_or_behind_its_template_or_unranked_fails_the_demo():
    behind, ok = order_line("softmax_py", "CPU", 14.0e-3, 8.5e-3)
    assert not ok
    assert behind == "softmax_py: solution 14 ms does NOT rank ahead of template 8.5 ms on CPU ✗"
    assert not order_line("softmax_py", "CPU", 1e-3, 1e-3)[1]
    missing, ok = order_line("identity_py", "CPU", None, 1e-3)
    assert not ok and missing == "identity_py: solution not ranked, template 1 ms on CPU ✗"
