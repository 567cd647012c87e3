"""The AsyncAPI 3.0 document of a tenant's bus, built from what is registered now
(``GET /v1/asyncapi``)."""
