"""kgwise's HTTP service: a thin FastAPI layer over the configured pipelines (:mod:`kgwise.app`)."""

from kgwise.server.app import EvidenceRequest, ServerSettings, create_app

__all__ = ["EvidenceRequest", "ServerSettings", "create_app"]
