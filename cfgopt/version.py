"""The release of cfgopt (the package's face hands it on as `cfgopt.__version__`)."""

__version__ = "0.1.0"
