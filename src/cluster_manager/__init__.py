"""GPU-kernel competitions: leaderboards, submissions, and a runner that times kernels."""

__version__ = "0.1.0"
