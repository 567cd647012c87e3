"""The public names of ``disco`` and ``disco.bus`` are pinned."""

from __future__ import annotations

import disco
import disco.bus


def test_disco_bus_exports_exactly_its_public_api() -> None:
    assert sorted(disco.bus.__all__) == [
        "ANY_EVENT",
        "Batch",
        "BatchHandler",
        "BatchItem",
        "BusClient",
        "BusConsumer",
        "BusError",
        "BusMetrics",
        "BusNotStartedError",
        "BusUnavailableError",
        "ContextAttributes",
        "CorrelationInUseError",
        "CredentialError",
        "CredentialSigner",
        "CredentialVerifier",
        "DedupMarks",
        "DedupStore",
        "DependencyUnavailableError",
        "DlqHeader",
        "DurableDedupStore",
        "EnvelopeAttributes",
        "FetchPacer",
        "Handler",
        "HandlerRegistrationError",
        "InMemoryDedupStore",
        "MessageTooLargeError",
        "NonRetryableError",
        "PublishError",
        "ReadRecord",
        "ReplyListener",
        "RequestTimeout",
        "TenantGuard",
        "TopicProvisioningError",
        "TopicReader",
        "serve_metrics",
        "sign_as",
        "signing_with",
        "stop_metrics",
        "tenant_guard",
        "tune_gc",
    ]
    assert all(hasattr(disco.bus, name) for name in disco.bus.__all__)


def test_disco_exports_the_handler_context_accessors() -> None:
    assert {
        "current_envelope",
        "current_context",
        "handler_context",
        "HandlerContext",
        "NotInHandlerError",
    } <= set(disco.__all__)
    assert all(hasattr(disco, name) for name in disco.__all__)
