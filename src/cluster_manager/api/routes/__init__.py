"""The API's endpoints: popcorn-cli's (`popcorn.py`) and our own (`native.py`)."""
