"""The alert webhook resource: where videolake's alert sensors (assets/alerts.py) post, Slack-compatible.

The URL is a secret: VIDEOLAKE_ALERT_WEBHOOK_URL through dg.EnvVar, resolved at run time; never in code, logs or
metadata.
"""

from __future__ import annotations

import json
import os
import urllib.request

import dagster as dg
from pydantic import Field

WEBHOOK_ENV = "VIDEOLAKE_ALERT_WEBHOOK_URL"


class AlertWebhookResource(dg.ConfigurableResource):
    url: str = Field(
        default="",
        description='Incoming-webhook URL that takes {"text": ...} (Slack, Mattermost, '
        "Rocket.Chat, Teams workflows). Set VIDEOLAKE_ALERT_WEBHOOK_URL; empty: alerts are only logged.",
    )
    timeout_s: float = Field(default=10.0, description="Seconds to wait for the webhook to answer.")

    def post(self, text: str, log=None) -> bool:
        """Post ``text``; True when the webhook answered 2xx. A failed post is logged, never raised: an alert
        must not fail the sensor that reports a failure."""
        if not self.url:
            if log:
                log.info(f"alert (no webhook configured): {text}")
            return False
        req = urllib.request.Request(
            self.url,
            data=json.dumps({"text": text}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return 200 <= resp.status < 300
        except OSError as exc:
            if log:
                log.warning(f"alert webhook did not take the message ({type(exc).__name__}: {exc})")
            return False


def alert_webhook_from_env() -> AlertWebhookResource:
    """The webhook resource: its URL from VIDEOLAKE_ALERT_WEBHOOK_URL (dg.EnvVar, resolved at run time) when set."""
    return AlertWebhookResource(url=dg.EnvVar(WEBHOOK_ENV) if os.environ.get(WEBHOOK_ENV) else "")
