"""jumbogate: controller, operator API and CLI of the MTU-translating border."""

__version__ = "0.1.0"
