"""envdoctor: the doctor for GPU machines that run PyTorch."""

__version__ = "0.1.0"
