"""Runs on the GPU machine. Imports only `cluster_manager.core` and the standard library."""
