"""kgwise's HTTP service: a thin FastAPI layer over the knowledge injector."""

from kgwise.server.app import AnswerRequest, ServerSettings, create_app

__all__ = ["AnswerRequest", "ServerSettings", "create_app"]
