"""The OpenAPI schema and its interactive page (drf-spectacular).

The page loads Swagger UI from ``drf-spectacular-sidecar`` when the host lists
``drf_spectacular_sidecar`` in ``INSTALLED_APPS`` (served as static files, no
network needed); otherwise from drf-spectacular's configured CDN.

The schema names the API and the installed package's version itself, so a
host needs no ``SPECTACULAR_SETTINGS`` (and its own title, meant for its own
API, does not end up on this one).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from django.apps import apps
from django.http import HttpResponse
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.request import Request
from rest_framework.views import APIView

from .compact import json_answer
from .errors import exception_handler

__all__ = ["API_TITLE", "DocsView", "SchemaView", "package_version"]

_SIDECAR_APP = "drf_spectacular_sidecar"
DISTRIBUTION = "django-llm-conversations"
API_TITLE = "django-llm-conversations API"


def package_version() -> str:
    """The installed distribution's version; ``0+unknown`` when run from an uninstalled tree."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


class _JSONErrors(APIView):
    """The API's error handling for drf-spectacular's views (they render YAML or HTML)."""

    # APIView's stubs want a DRF Response; a plain JSON response is what DRF accepts too.
    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]
        # A wrong method or an Accept these views cannot render answers in the
        # API's compact JSON shape, not in the host's handler's nor in YAML.
        response = exception_handler(exc, self.get_exception_handler_context())
        if response is None:
            raise exc
        headers = {name: value for name, value in response.items() if name != "Content-Type"}
        return json_answer(response.data, status=response.status_code, headers=headers)


class SchemaView(_JSONErrors, SpectacularAPIView):
    """``GET schema/``: the OpenAPI 3 document (YAML, or JSON with ``Accept``)."""

    schema = None  # not an operation of the API itself
    custom_settings: dict[str, Any] = {
        "TITLE": API_TITLE,
        "DESCRIPTION": "Tool-calling LLM conversations as a typed, persisted record.",
        "VERSION": package_version(),
    }


class DocsView(_JSONErrors, SpectacularSwaggerView):
    """``GET docs/``: Swagger UI over :class:`SchemaView`."""

    url_name = "conversations:schema"
    schema = None  # not an operation of the API itself

    # APIView's stubs narrow View.options to a DRF Response (they ignore the same
    # error); this page answers with a plain JSON response, which DRF accepts.
    def options(  # type: ignore[override]
        self, request: Request, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        # The page's only renderer is an HTML template, which has nothing to
        # render a description with: answer it as JSON, like the other routes.
        metadata_class = self.metadata_class
        # DRF's setting is a class here; the stubs also allow a dotted path or None.
        assert isinstance(metadata_class, type)
        metadata = metadata_class().determine_metadata(request, self)
        return json_answer(metadata, headers={"Allow": ", ".join(self.allowed_methods)})

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        if apps.is_installed(_SIDECAR_APP):
            from django.templatetags.static import static

            return static(f"{_SIDECAR_APP}/swagger-ui-dist/{filename}")
        resource: str = SpectacularSwaggerView._swagger_ui_resource(filename)
        return resource

    @staticmethod
    def _swagger_ui_favicon() -> str:
        if apps.is_installed(_SIDECAR_APP):
            from django.templatetags.static import static

            return static(f"{_SIDECAR_APP}/swagger-ui-dist/favicon-32x32.png")
        favicon: str = SpectacularSwaggerView._swagger_ui_favicon()
        return favicon
