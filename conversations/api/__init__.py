"""The REST API (DRF): thin views over the services, one error shape."""
