"""Option validation beyond curlyq's defaults and minimums (covered in test_consumer.py)."""

import logging
from datetime import timedelta

import pytest

from gq import ConfigurationError, ConsumerOptions
from gq.backoff import backoff


def test_durations_accept_timedelta_and_store_seconds():
    opts = ConsumerOptions(job_timeout=timedelta(seconds=90), dead_max_age=timedelta(days=1))
    assert opts.job_timeout == 90.0
    assert opts.dead_max_age == 86400.0


def test_zero_grace_period_and_job_timeout_mean_none():
    opts = ConsumerOptions(shutdown_grace_period=0, job_timeout=0)
    assert opts.shutdown_grace_period is None
    assert opts.job_timeout is None


@pytest.mark.parametrize(
    "name, value",
    [
        ("processor_concurrency", 0),
        ("poller_buffer_size", -1),
        ("job_max_attempts", -1),
        ("job_max_backoff", -5),
        ("scheduler_poll_interval", "5"),
        ("processor_concurrency", 2.5),
        ("processor_concurrency", True),
        ("heartbeat_poll_interval", float("nan")),
        ("dead_max_jobs", 0),
    ],
)
def test_nonsensical_values_raise_configuration_error_naming_the_field(name, value):
    with pytest.raises(ConfigurationError, match=name):
        ConsumerOptions(**{name: value})


def test_configuration_error_is_also_a_value_error():
    assert issubclass(ConfigurationError, ValueError)


def test_values_below_a_minimum_are_raised_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="gq.options"):
        opts = ConsumerOptions(heartbeat_poll_interval=0.5)
    assert opts.heartbeat_poll_interval == 1.0
    assert "heartbeat_poll_interval" in caplog.text


def test_backoff_follows_curlyqs_formula_and_its_cap():
    assert backoff(6, cap=1000, rand=0.0) == 32.0
    assert backoff(6, cap=1000, rand=0.999) == pytest.approx(63.968)
    assert backoff(6, cap=10, rand=0.5) == 10
    assert backoff(10_000, cap=30) == 30


# -- gq.Consumer(options=...): what is exported is accepted ---------------------------------


def _consumer(**kwargs):
    import gq

    return gq.Consumer("q", url="redis://127.0.0.1:1/0", **kwargs)  # never connects


def test_a_consumer_takes_a_consumer_options_and_keywords_beside_it_win():
    given = ConsumerOptions(processor_concurrency=7, job_max_attempts=3)
    consumer = _consumer(options=given, job_max_attempts=5)
    assert consumer.opts.processor_concurrency == 7
    assert consumer.opts.job_max_attempts == 5
    assert given.job_max_attempts == 3 and consumer.opts is not given  # the caller's stays


def test_a_consumer_refuses_options_that_are_not_consumer_options():
    with pytest.raises(ConfigurationError, match="gq.ConsumerOptions"):
        _consumer(options={"processor_concurrency": 7})


def test_keywords_beside_options_are_checked_by_name_and_value():
    with pytest.raises(ConfigurationError, match="did you mean processor_concurrency"):
        _consumer(options=ConsumerOptions(), concurrency=7)
    with pytest.raises(ConfigurationError, match="processor_concurrency"):
        _consumer(options=ConsumerOptions(), processor_concurrency=0)
