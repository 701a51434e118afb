"""podctl: describe a GPU pod once, deploy it, and certify it with measurements."""

__version__ = "0.1.0"
