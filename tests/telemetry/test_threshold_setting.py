"""CLUSTER_MANAGER_THROTTLE_THRESHOLD: the operator's share of throttled samples."""

from __future__ import annotations

import pytest

from cluster_manager.core.errors import ClusterManagerError
from cluster_manager.settings import load_settings


def test_the_threshold_defaults_to_five_percent_and_is_a_share():
    assert load_settings({}, dotenv_path=None).throttle_threshold == 0.05
    env = {"CLUSTER_MANAGER_THROTTLE_THRESHOLD": "0.1"}
    assert load_settings(env, dotenv_path=None).throttle_threshold == 0.1
    with pytest.raises(ClusterManagerError, match="share between 0 and 1"):
        load_settings({"CLUSTER_MANAGER_THROTTLE_THRESHOLD": "5"}, dotenv_path=None)
