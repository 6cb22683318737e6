"""One narrow interface to run a request somewhere, one adapter per place."""
