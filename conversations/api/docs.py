"""The OpenAPI schema and its interactive page (drf-spectacular).

The page loads Swagger UI from ``drf-spectacular-sidecar`` when the host lists
``drf_spectacular_sidecar`` in ``INSTALLED_APPS`` (served as static files, no
network needed); otherwise from drf-spectacular's configured CDN.
"""

from __future__ import annotations

from django.apps import apps
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

__all__ = ["DocsView", "SchemaView"]

_SIDECAR_APP = "drf_spectacular_sidecar"


class SchemaView(SpectacularAPIView):
    """``GET schema/``: the OpenAPI 3 document (YAML, or JSON with ``Accept``)."""

    schema = None  # not an operation of the API itself


class DocsView(SpectacularSwaggerView):
    """``GET docs/``: Swagger UI over :class:`SchemaView`."""

    url_name = "conversations:schema"
    schema = None  # not an operation of the API itself

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        if apps.is_installed(_SIDECAR_APP):
            from django.templatetags.static import static

            return static(f"{_SIDECAR_APP}/swagger-ui-dist/{filename}")
        return SpectacularSwaggerView._swagger_ui_resource(filename)

    @staticmethod
    def _swagger_ui_favicon() -> str:
        if apps.is_installed(_SIDECAR_APP):
            from django.templatetags.static import static

            return static(f"{_SIDECAR_APP}/swagger-ui-dist/favicon-32x32.png")
        return SpectacularSwaggerView._swagger_ui_favicon()
