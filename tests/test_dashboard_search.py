"""The dashboard's faces of issue 34 over HTTP, on fakeredis and a real Redis: the search
box (the filters of ``gq jobs``, paged by cursor), the bulk actions on a selection or on
all matching (checked in Redis), the runtime schedules page, the running list with its
progress bars, and the refusals (bad input 400, CSRF 403, read-only 403)."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import redis

import gq
from gq import dashboard
from gq.jobfilter import Candidate, JobFilter
from gq.store.progress import write_progress
from tests.bulk_support import Jobs, task_message
from tests.dashboard_support import Http, Reply, serving
from tests.helpers import Backend

pytestmark = pytest.mark.timeout(60)


class Site:
    """The dashboard served on the backend's Redis, and jobs of its queue."""

    def __init__(self, http: Http, client: redis.Redis, name: str) -> None:
        self.http, self.client, self.name = http, client, name
        self.jobs = Jobs(client, name)

    def path(self, suffix: str = "") -> str:
        return f"/queues/{self.name}{suffix}"

    def search(self, **fields: Any) -> Reply:
        pairs = [(k, v) for k, vs in fields.items() for v in (vs if isinstance(vs, list) else [vs])]
        return self.http.get(self.path("/jobs") + "?" + urlencode(pairs))

    def act(self, verb: str, *fields: tuple[str, str], token: str | None = None) -> Reply:
        token = token if token is not None else self.http.get(self.path("/periodic")).token
        sent = [("csrf_token", token), ("verb", verb), *fields]
        return self.http.post(self.path("/jobs/act"), sent)

    def dead(self) -> set[str]:
        return {i.decode() for i in self.client.zrange(self.jobs.q.keys.dead, 0, -1)}

    def scheduled(self) -> dict[str, float]:
        rows = self.client.zrange(self.jobs.q.keys.scheduled, 0, -1, withscores=True)
        return {i.decode(): s for i, s in rows}


def serve(backend: Backend, **options: Any) -> Iterator[Site]:
    client = backend.client()
    app = dashboard.app(client=client, queues=[backend.queue], refresh=0, **options)
    with serving(app) as address:
        yield Site(Http(address), client, backend.queue)


@pytest.fixture
def site(backend: Backend) -> Iterator[Site]:
    yield from serve(backend)


@pytest.fixture
def read_only(backend: Backend) -> Iterator[Site]:
    yield from serve(backend, read_only=True)


def rows(body: str) -> list[str]:
    """The ids of the search's result rows, in order."""
    return re.findall(r'<tr class="job" data-job="([^"]+)"', body)


def link(body: str, anchor: str) -> str | None:
    match = re.search(rf'<a href="([^"]+)" id="{anchor}"', body)
    return html.unescape(match.group(1)) if match else None


# -- the search ----------------------------------------------------------------------------


def test_the_search_finds_jobs_by_args_and_state_and_links_each_to_its_page(site: Site) -> None:
    acme = site.jobs.dead("app.send", "a@x", tenant="acme")
    beta = site.jobs.dead("app.send", "b@x", tenant="beta")
    ready = site.jobs.ready("app.send", "c@x", tenant="acme")
    reply = site.search(state="dead", args="tenant=acme")
    assert reply.status == 200 and rows(reply.body) == [acme]
    assert f'href="{site.path("/job")}?id={acme}"' in reply.body
    assert set(rows(site.search(args="tenant=acme").body)) == {acme, ready}
    assert rows(site.search(task="app.send", error="BOOM", state="dead").body) != []
    assert set(rows(site.search(state="dead").body)) == {acme, beta}
    assert rows(site.search(id_prefix=beta[:-3]).body) == [beta]
    # The form shows the filter it ran.
    assert 'name="args" value="tenant=acme"' in reply.body


def test_given_an_apps_tasks_the_search_by_name_finds_calls_by_position(backend: Backend) -> None:
    app = gq.App(queue=backend.queue)

    @app.task(name="app.send")
    def send(to: str, tenant: str) -> None: ...

    for site in serve(backend, tasks=app.tasks):
        positional = site.jobs.dead("app.send", "a@x", "acme")
        named = site.jobs.dead("app.send", "b@x", tenant="acme")
        site.jobs.dead("app.send", "c@x", "beta")
        assert set(rows(site.search(args="tenant=acme").body)) == {positional, named}
        # A bulk action acts on what the search shows.
        reply = site.act("delete:all", ("state", "dead"), ("args", "tenant=acme"))
        assert "done=delete&n=2" in reply.headers["Location"]
        assert len(site.dead()) == 1


def test_the_search_pages_with_its_cursor_without_gaps_or_repeats(site: Site) -> None:
    made = {site.jobs.ready("app.page", i) for i in range(7)}
    site.jobs.ready("app.other", 99)
    seen: list[str] = []
    reply = site.search(task="app.page", per="3")
    pages = 1
    while True:
        seen += rows(reply.body)
        following = link(reply.body, "next-page")
        if following is None:
            break
        assert "task=app.page" in following and "cursor=" in following
        reply = site.http.get(following)
        pages += 1
        assert link(reply.body, "first-page") is not None
    assert sorted(seen) == sorted(made) and len(seen) == 7 and pages >= 3


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"state": "deadd"}, "unknown state &#39;deadd&#39;"),
        ({"args": "tenant"}, "--args wants KEY=VALUE"),
        ({"older_than": "2x"}, "invalid duration &#39;2x&#39;"),
        ({"cursor": "nonsense"}, "not a gq cursor"),
    ],
)
def test_a_bad_filter_is_a_400_page_that_says_what_is_wrong(
    site: Site, fields: dict[str, str], says: str
) -> None:
    site.jobs.ready("app.x")
    reply = site.search(**fields)
    assert reply.status == 400
    assert 'id="search-problem"' in reply.body and says in reply.body, reply.body[-2000:]
    assert "Traceback" not in reply.body and 'id="search"' in reply.body  # the form stays


def test_markup_in_a_filter_or_a_job_shows_as_text(site: Site) -> None:
    site.jobs.dead("app.x", "<script>alert(1)</script>", error="<img src=x onerror=alert(2)>")
    body = site.search(state="dead", task="<b>app.x</b>").body
    assert "<b>app.x</b>" not in body and "&lt;b&gt;app.x&lt;/b&gt;" in body
    body = site.search(state="dead").body
    assert "<script>alert(1)" not in body and "<img src=x" not in body


# -- bulk actions --------------------------------------------------------------------------


def test_retry_two_of_three_dead_jobs_selected(site: Site) -> None:
    a, b, c = (site.jobs.dead("app.send", i) for i in range(3))
    reply = site.act("retry", ("state", "dead"), ("task", "app.send"), ("id", a), ("id", c))
    assert reply.status == 303
    location = reply.headers["Location"]
    assert location.startswith(site.path("/jobs") + "?state=dead&task=app.send&")
    assert "done=retry&n=2" in location
    assert site.dead() == {b} and sorted(site.jobs.active()) == sorted([a, c])
    assert "2 job(s) queued again." in site.http.get(location).body


def test_all_matching_acts_on_every_match_beyond_the_page_and_nothing_else(site: Site) -> None:
    broken = [site.jobs.dead("app.broken", i) for i in range(30)]
    fine = site.jobs.dead("app.fine", 1)
    reply = site.act(
        "delete:all", ("state", "dead"), ("task", "app.broken"), ("id", fine)
    )  # fmt: skip  (a stray selection is not what "all" means)
    assert "done=delete&n=30" in reply.headers["Location"]
    assert site.dead() == {fine}
    assert not any(site.jobs.has_message(i) for i in broken) and site.jobs.has_message(fine)


def test_purge_and_move_ready_jobs(site: Site, backend: Backend) -> None:
    acme = [site.jobs.ready("app.send", i, tenant="acme") for i in range(3)]
    beta = site.jobs.ready("app.send", 9, tenant="beta")
    site.act("purge", ("state", "ready"), ("id", acme[0]))
    assert sorted(site.jobs.active()) == sorted([*acme[1:], beta])
    target = f"{backend.queue}-moved"
    reply = site.act("move:all", ("state", "ready"), ("args", "tenant=acme"), ("to", target))
    assert "done=move&n=2" in reply.headers["Location"]
    assert site.jobs.active() == [beta]
    assert sorted(Jobs(site.client, target).active()) == sorted(acme[1:])
    same = site.act("move", ("state", "ready"), ("id", beta), ("to", backend.queue))
    assert same.status == 400 and "same queue" in same.body and site.jobs.active() == [beta]
    assert site.act("move", ("state", "ready"), ("id", beta)).status == 400  # no target


def test_run_reschedule_and_delete_scheduled_jobs(site: Site) -> None:
    run, later, gone, stays = (site.jobs.scheduled("app.s", i) for i in range(4))
    site.act("run", ("state", "scheduled"), ("id", run))
    assert site.jobs.active() == [run]
    before = time.time()
    reply = site.act("reschedule", ("state", "scheduled"), ("id", later), ("in", "10m"))
    assert "done=reschedule&n=1" in reply.headers["Location"]
    assert abs(site.scheduled()[later] - (before + 600)) < 30
    site.act("reschedule", ("state", "scheduled"), ("id", stays), ("at", "2030-01-02T03:04"))
    assert site.scheduled()[stays] == 1893553440.0  # 2030-01-02 03:04 UTC
    site.act("delete", ("state", "scheduled"), ("id", gone))
    assert set(site.scheduled()) == {later, stays} and not site.jobs.has_message(gone)
    bad = site.act("reschedule", ("state", "scheduled"), ("id", later), ("in", "soon"))
    assert bad.status == 400 and "invalid duration" in bad.body


def test_actions_are_offered_only_for_one_state_and_checked_again_on_post(site: Site) -> None:
    job = site.jobs.dead("app.x")
    assert 'value="retry:all"' in site.search(state="dead").body
    assert 'id="bulk"' not in site.search().body  # several states: nothing to act with
    assert 'value="purge"' in site.search(state="ready").body
    assert site.act("purge", ("state", "dead"), ("id", job)).status == 400
    assert site.act("retry", ("id", job)).status == 400  # no state
    assert site.act("explode", ("state", "dead"), ("id", job)).status == 400
    assert site.dead() == {job}


def test_no_selection_changes_nothing(site: Site) -> None:
    job = site.jobs.dead("app.x")
    reply = site.act("retry", ("state", "dead"))
    assert reply.headers["Location"].endswith("done=none")
    assert site.dead() == {job}


def test_a_post_without_a_valid_csrf_token_is_refused(site: Site) -> None:
    job = site.jobs.dead("app.x")
    site.http.get(site.path("/jobs"))  # the cookie is set
    for token in ("", "forged.token"):
        assert site.act("retry", ("state", "dead"), ("id", job), token=token).status == 403
    add = site.http.post(site.path("/periodic/add"), [("name", "n"), ("task", "t"),
                                                      ("every", "60")])  # fmt: skip
    assert add.status == 403
    assert site.dead() == {job}
    assert gq.Queue(site.name, client=site.client).periodic_schedules() == []


def test_read_only_hides_every_action_and_refuses_them(read_only: Site) -> None:
    job = read_only.jobs.dead("app.x")
    body = read_only.search(state="dead").body
    assert rows(body) == [job]
    assert 'id="bulk"' not in body and 'type="checkbox"' not in body
    queue = gq.Queue(read_only.name, client=read_only.client)
    queue.add_periodic("nightly", "app.report", every=60)
    page = read_only.http.get(read_only.path("/periodic")).body
    assert 'data-schedule="nightly"' in page and "<form" not in page.split("</header>")[1]
    read_only.http.get(read_only.path("/jobs"))
    token = read_only.http.cookies["gq_csrf"]  # (no form on the page to read it from)
    assert read_only.act("retry", ("state", "dead"), ("id", job), token=token).status == 403
    paused = read_only.http.post(read_only.path("/periodic/pause"),
                                 [("csrf_token", token), ("schedule", "nightly")])  # fmt: skip
    assert paused.status == 403
    assert read_only.dead() == {job} and not queue.periodic_schedules()[0].paused


# -- runtime schedules ---------------------------------------------------------------------


def test_a_schedule_is_added_paused_resumed_and_removed_from_its_page(site: Site) -> None:
    queue = gq.Queue(site.name, client=site.client)
    token = site.http.get(site.path("/periodic")).token
    fields = [("csrf_token", token), ("name", "digest"), ("task", "app.digest"),
              ("cron", "*/5 * * * *"), ("args", '["daily"]'),
              ("kwargs", '{"tenant": "acme"}')]  # fmt: skip
    added = site.http.post(site.path("/periodic/add"), fields)
    assert added.headers["Location"] == site.path("/periodic") + "?done=added"
    [schedule] = queue.periodic_schedules()
    assert (schedule.task, schedule.cron, schedule.args, schedule.kwargs) == (
        "app.digest", "*/5 * * * *", ["daily"], {"tenant": "acme"})  # fmt: skip
    body = site.http.get(added.headers["Location"]).body
    assert 'data-schedule="digest"' in body and "*/5 * * * *" in body and "Schedule added" in body
    for verb, paused in (("pause", True), ("resume", False)):
        reply = site.http.post(site.path(f"/periodic/{verb}"),
                               [("csrf_token", token), ("schedule", "digest")])  # fmt: skip
        assert reply.status == 303 and queue.periodic_schedules()[0].paused is paused
    site.http.post(site.path("/periodic/remove"), [("csrf_token", token), ("schedule", "digest")])
    assert queue.periodic_schedules() == []
    gone = site.http.post(site.path("/periodic/pause"),
                          [("csrf_token", token), ("schedule", "digest")])  # fmt: skip
    assert gone.headers["Location"].endswith("done=missing")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"cron": "every tuesday"}, "bad cron rule"),
        ({"cron": "* * * * *", "args": "{not json"}, "args is not JSON"),
        ({"cron": "* * * * *", "kwargs": "[1]"}, "kwargs must be a JSON an object"),
        ({"every": "soon"}, "every must be whole seconds"),
    ],
)
def test_a_bad_schedule_is_a_400_page_that_keeps_the_form(
    site: Site, fields: dict[str, str], says: str
) -> None:
    token = site.http.get(site.path("/periodic")).token
    sent = [("csrf_token", token), ("name", "bad"), ("task", "app.t"), *fields.items()]
    reply = site.http.post(site.path("/periodic/add"), sent)
    assert reply.status == 400 and 'id="schedule-problem"' in reply.body
    assert says in html.unescape(reply.body)
    assert 'name="task" value="app.t"' in reply.body
    assert gq.Queue(site.name, client=site.client).periodic_schedules() == []


# -- the running list ----------------------------------------------------------------------


def test_the_running_list_shows_jobs_in_flight_with_consumer_and_progress(site: Site) -> None:
    q = site.jobs.q
    reporting = site.jobs.ready("app.files", 7)
    quiet = site.jobs.ready("app.quiet")
    consumer = "c0nsumer-1234"
    q.register(consumer)
    assert {job_id for job_id, _ in q.fetch(consumer, 2)} == {reporting, quiet}
    write_progress(site.client, site.name, reporting, (0.42, "<b>3 of 7</b>", 0))
    body = site.http.get(site.path("/running")).body
    row = body[body.index(f'data-job="{reporting}"') :]
    row = row[: row.index("</tr>")]
    assert 'value="0.42"' in row and "42%" in row and "&lt;b&gt;3 of 7&lt;/b&gt;" in row
    assert "app.files" in row and 'title="c0nsumer-1234"' in row
    other = body[body.index(f'data-job="{quiet}"') :]
    assert "<progress" not in other[: other.index("</tr>")]
    # A report of an earlier attempt is not this run's progress.
    write_progress(site.client, site.name, quiet, (0.9, "old", 5))
    assert 'value="0.9"' not in site.http.get(site.path("/running")).body
    assert "Running <span" in body  # the tab


def test_the_filter_narrowed_to_ids_matches_those_ids_only() -> None:
    chosen = JobFilter(ids=("a", "b"))
    assert chosen.narrows()
    message = task_message("a", "t")
    assert chosen.matches(Candidate("a", "ready", None, message), 0.0)
    assert not chosen.matches(Candidate("c", "ready", None, message), 0.0)
