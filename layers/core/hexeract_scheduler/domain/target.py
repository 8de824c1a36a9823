"""Targets: where occurrences are delivered, written ``sqs:<queue URL or ARN>`` or
``sns:<topic ARN>`` (optionally ``?group=NAME`` for a FIFO target) wherever a user types one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hexeract_scheduler.errors import InvalidTarget

_SQS_ARN = re.compile(r"^arn:(aws[a-z-]*):sqs:([a-z0-9-]+):(\d{12}):([A-Za-z0-9_-]{1,80}(?:\.fifo)?)$")
_SQS_URL = re.compile(r"^https?://[^/\s]+/(\d{12}|[A-Za-z0-9_-]+)/([A-Za-z0-9_-]{1,80}(?:\.fifo)?)$")
_SNS_ARN = re.compile(r"^arn:(aws[a-z-]*):sns:([a-z0-9-]+):(\d{12}):([A-Za-z0-9_-]{1,256}(?:\.fifo)?)$")
_GROUP_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
_REGION_IN_HOST = re.compile(r"(?:^|\.)sqs\.([a-z0-9-]+)\.amazonaws\.com")


@dataclass(frozen=True, slots=True)
class Target:
    """Where an occurrence is delivered: ``sqs:<queue URL or ARN>`` or ``sns:<topic ARN>``.

    A FIFO queue or topic (name ending ``.fifo``) gets ``MessageGroupId`` = ``group_id`` (default:
    the schedule id) and ``MessageDeduplicationId`` = the occurrence id. The group may be given in
    the string form as a ``?group=NAME`` suffix.
    """

    kind: str  # "sqs" | "sns"
    address: str  # queue URL or ARN, topic ARN
    group_id: str | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        text = text.strip()
        address, _, query = text.partition("?")
        group = None
        if query:
            key, _, value = query.partition("=")
            if key != "group" or not value:
                raise InvalidTarget(f"invalid target {text!r}: the only option is ?group=NAME")
            group = value
        kind, sep, rest = address.partition(":")
        if not sep or kind not in ("sqs", "sns"):
            raise InvalidTarget(f"invalid target {text!r}: expected sqs:<queue URL or ARN> or sns:<topic ARN>")
        return cls(kind, rest, group)

    @classmethod
    def sqs(cls, queue: str, group_id: str | None = None) -> Target:
        return cls("sqs", queue, group_id)

    @classmethod
    def sns(cls, topic_arn: str, group_id: str | None = None) -> Target:
        return cls("sns", topic_arn, group_id)

    def __post_init__(self) -> None:
        ok = (self.kind == "sqs" and (_SQS_ARN.match(self.address) or _SQS_URL.match(self.address))) or (
            self.kind == "sns" and _SNS_ARN.match(self.address)
        )
        if not ok:
            what = "an SQS queue URL or ARN" if self.kind == "sqs" else "an SNS topic ARN"
            if self.kind not in ("sqs", "sns"):
                raise InvalidTarget(f"invalid target kind {self.kind!r}: expected sqs or sns")
            raise InvalidTarget(f"invalid target {self.kind}:{self.address}: expected {what}")
        if self.group_id is not None:
            if not _GROUP_ID.match(self.group_id):
                raise InvalidTarget(f"invalid group id {self.group_id!r}: 1-128 printable ASCII characters")
            if not self.is_fifo:
                raise InvalidTarget(f"target {self.kind}:{self.address} is not FIFO: a group id applies to FIFO only")

    @property
    def name(self) -> str:
        """Queue or topic name (last path/ARN segment)."""
        return re.split(r"[/:]", self.address)[-1]

    @property
    def is_fifo(self) -> bool:
        return self.name.endswith(".fifo")

    @property
    def is_arn(self) -> bool:
        return self.address.startswith("arn:")

    @property
    def region(self) -> str | None:
        if self.is_arn:
            return self.address.split(":")[3]
        host = self.address.split("/")[2]
        m = _REGION_IN_HOST.search(host)
        return m.group(1) if m else None

    def __str__(self) -> str:
        return f"{self.kind}:{self.address}" + (f"?group={self.group_id}" if self.group_id else "")
