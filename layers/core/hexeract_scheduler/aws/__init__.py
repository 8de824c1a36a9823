"""The AWS boundary: clients and where they point, botocore's errors translated into the package's,
and a deployed stack's table read from its outputs. Nothing outside this package (and the stores
and sinks that call AWS through it) imports botocore."""

from __future__ import annotations

from hexeract_scheduler.aws.clients import LOCAL_REGION, ClientFactory, Connection
from hexeract_scheduler.aws.translate import aws_errors, error_code, translate

__all__ = ["LOCAL_REGION", "ClientFactory", "Connection", "aws_errors", "error_code", "translate"]
