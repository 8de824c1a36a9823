from __future__ import annotations

from datetime import datetime

import pytest

from hexeract_scheduler import CronSchedule, InvalidCron
from hexeract_scheduler.domain.clock import UTC
from hexeract_scheduler.domain.cron import load_zone


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_five_fields_and_strictly_after():
    c = CronSchedule("*/15 * * * *")
    assert c.next_after(utc(2026, 1, 1, 0, 0)) == utc(2026, 1, 1, 0, 15)
    assert c.next_after(utc(2026, 1, 1, 0, 14, 59, 999000)) == utc(2026, 1, 1, 0, 15)


def test_six_fields_lead_with_seconds():
    c = CronSchedule("*/2 * * * * *")
    assert c.next_after(utc(2026, 1, 1, 0, 0, 0)) == utc(2026, 1, 1, 0, 0, 2)
    assert c.next_after(utc(2026, 1, 1, 0, 0, 1, 500000)) == utc(2026, 1, 1, 0, 0, 2)
    assert CronSchedule("30 0 12 * * *").next_after(utc(2026, 1, 1)) == utc(2026, 1, 1, 12, 0, 30)


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("@hourly", utc(2026, 1, 1, 1)),
        ("@daily", utc(2026, 1, 2)),
        ("@weekly", utc(2026, 1, 4)),  # Sunday
        ("@monthly", utc(2026, 2, 1)),
        ("@yearly", utc(2027, 1, 1)),
    ],
)
def test_macros(macro, expected):
    assert CronSchedule(macro).next_after(utc(2026, 1, 1, 0, 0, 1)) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "* * *",
        "* * * * * * *",
        "61 * * * *",
        "* 25 * * *",
        "@reboot",
        "@every 5m",
        "0 0 30 2 *",
        "H * * * *",
        "x y z w v",
    ],
)
def test_invalid_expressions_are_refused(bad):
    with pytest.raises(InvalidCron):
        CronSchedule(bad)


@pytest.mark.parametrize("zone", ["Mars/Olympus", "", "../etc/passwd", "/etc/localtime", " UTC"])
def test_invalid_zones_are_refused(zone):
    with pytest.raises(InvalidCron, match="time zone"):
        CronSchedule("* * * * *", zone)


def test_spring_forward_skips_the_missing_local_time():
    # 2026-03-08 02:30 does not exist in New York: that day is skipped, as EventBridge Scheduler does.
    c = CronSchedule("30 2 * * *", "America/New_York")
    first = c.next_after(utc(2026, 3, 7, 12))
    assert first == utc(2026, 3, 9, 6, 30)  # 02:30 EDT on the 9th
    assert c.next_after(utc(2026, 3, 6, 12)) == utc(2026, 3, 7, 7, 30)  # 02:30 EST on the 7th


def test_fall_back_fires_a_repeated_local_time_once():
    c = CronSchedule("30 1 * * *", "America/New_York")
    first = c.next_after(utc(2026, 10, 31, 12))
    assert first == utc(2026, 11, 1, 5, 30)  # first 01:30 (EDT)
    second = c.next_after(first)
    assert second == utc(2026, 11, 2, 6, 30)  # the repeated 01:30 (EST) is not fired
    zone = load_zone("America/New_York")
    assert second.astimezone(zone).hour == 1


def test_minute_cron_through_the_repeated_hour_never_goes_back_in_time():
    c = CronSchedule("*/20 * * * *", "Europe/Paris")
    t = utc(2026, 10, 25, 0, 10)  # 02:10 CEST, an hour before the fall-back
    seen = []
    for _ in range(8):
        t = c.next_after(t)
        seen.append(t)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


def test_zone_is_wall_clock():
    c = CronSchedule("0 9 * * *", "Asia/Tokyo")
    assert c.next_after(utc(2025, 12, 31, 23)) == utc(2026, 1, 1, 0, 0)  # 09:00 JST
    assert c.next_after(utc(2026, 1, 1, 0, 0, 1)) == utc(2026, 1, 2, 0, 0)


def test_label():
    assert CronSchedule("*/5 * * * *").label() == "cron:*/5 * * * *"
    assert CronSchedule("0 9 * * 1", "Europe/Paris").label() == "cron:0 9 * * 1 tz=Europe/Paris"
