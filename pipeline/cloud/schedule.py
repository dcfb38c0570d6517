"""Runs the compiled pipeline on a schedule: a Vertex AI pipeline-job schedule, or a Kubeflow
Pipelines recurring run.

    python -m pipeline.cloud.schedule create --target vertex --cron "0 3 * * *" [--dry-run]
    python -m pipeline.cloud.schedule list --target vertex
    python -m pipeline.cloud.schedule remove --target vertex --id <schedule name or id>

The pipeline file is the one `make compile` wrote for the target. Each scheduled run reads the
newest span under the data URI (TFX's ExampleGen picks it where the step runs). One run at a
time: a run that is still going when the next is due makes that one wait (Vertex) or be
skipped (KFP, no catch-up). --dry-run builds the request with the real SDK objects and prints
it, without any network call.

The cron rules each backend applies:
- Vertex AI: a standard five-field cron expression, optionally prefixed with "TZ=<IANA zone>"
  or "CRON_TZ=<IANA zone>" (aiplatform `PipelineJobSchedule.create`); without one, UTC.
- Kubeflow Pipelines: six fields, seconds first, in robfig/cron's format
  (`kfp.Client.create_recurring_run`); no time zone prefix. The five fields given here run at
  second 0.
"""

import argparse
import json
import os
import re
import sys
import tempfile
import zoneinfo
from typing import Any

from pipeline.cloud import settings, submit
from pipeline.pipeline_config import ConfigError

# Each cron field: its name, range, and the names it may use (months, week days).
_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
           ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP",
                             "OCT", "NOV", "DEC")),
           ("day of week", 0, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")))
_ZONE = re.compile(r"^(CRON_TZ|TZ)=(\S+)\s+(.*)$")


def check_cron(cron: str, target: str) -> str:
    """The cron expression the target's backend takes for `cron` (five fields, optionally with
    a time zone prefix on Vertex).

    Raises:
      ConfigError: naming the field, its value and the expected form.
    """
    text = cron.strip()
    zone = _ZONE.match(text)
    if zone:
        if target == "kfp":
            raise ConfigError(f"CRON={cron!r}: Kubeflow Pipelines takes no time zone prefix; "
                              "give the time in the cluster's zone")
        try:
            zoneinfo.ZoneInfo(zone.group(2))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"CRON={cron!r}: {zone.group(2)!r} is no IANA time zone, e.g. "
                              "TZ=Europe/Paris") from None
        text = zone.group(3)
    fields = text.split()
    if len(fields) != len(_FIELDS):
        raise ConfigError(f"CRON={cron!r}: expected five fields, minute hour day-of-month "
                          "month day-of-week, e.g. CRON=\"0 3 * * *\" (every day at 03:00)")
    for value, (name, low, high, words) in zip(fields, _FIELDS, strict=True):
        for part in value.split(","):
            if not _cron_part(part.upper(), low, high, words):
                raise ConfigError(f"CRON={cron!r}: the {name} field {value!r} is not "
                                  f"*, a number in {low}..{high}"
                                  + (f" or {words[0]}..{words[-1]}" if words else "")
                                  + ", a range a-b, a list a,b or a step */n")
    return f"0 {text}" if target == "kfp" else cron.strip()


def _cron_part(part: str, low: int, high: int, words: tuple[str, ...]) -> bool:
    base, _, step = part.partition("/")
    if step and not (step.isdigit() and int(step) > 0):
        return False
    if base == "*":
        return True
    ends = base.split("-")
    if len(ends) > 2:
        return False
    numbers = [words.index(e) + low if e in words else int(e) if e.isdigit() else None
               for e in ends]
    return all(n is not None and low <= n <= high for n in numbers) and numbers == sorted(
        numbers)


def vertex_schedule(cloud: settings.CloudConfig, pipeline_file: str, cron: str,
                    dry_run: bool):
    """The aiplatform PipelineJobSchedule and the Schedule its `create` sends."""
    from google.cloud import aiplatform

    job = submit.vertex_job(cloud, pipeline_file, dry_run)
    schedule = aiplatform.PipelineJobSchedule(
        pipeline_job=job, display_name=f"{cloud.pipeline_name}-schedule",
        credentials=job.credentials if dry_run else None)
    # What PipelineJobSchedule._create sets before it sends the request.
    request = schedule._gca_resource
    request.cron = check_cron(cron, "vertex")
    request.max_concurrent_run_count = 1
    request.allow_queueing = True
    if cloud.service_account:
        request.create_pipeline_job_request.pipeline_job.service_account = cloud.service_account
    if cloud.network:
        request.create_pipeline_job_request.pipeline_job.network = cloud.network
    return schedule


def describe_vertex(schedule) -> dict[str, Any]:
    resource = schedule._gca_resource
    return {"parent": schedule._parent, "schedule": json.loads(type(resource).to_json(resource))}


def kfp_recurring_run(client, cloud: settings.CloudConfig, package: str, cron: str,
                      experiment_id: str):
    """The V2beta1RecurringRun `create_recurring_run` sends, built as the kfp client builds
    it."""
    import kfp_server_api

    job_config = client._create_job_config(
        params={}, pipeline_package_path=package, pipeline_id=None, version_id=None,
        enable_caching=cloud.enable_cache, cache_key="",
        pipeline_root=cloud.pipeline_root)
    return kfp_server_api.V2beta1RecurringRun(
        experiment_id=experiment_id, mode=kfp_server_api.RecurringRunMode.ENABLE,
        display_name=f"{cloud.pipeline_name}-schedule",
        pipeline_spec=job_config.pipeline_spec, runtime_config=job_config.runtime_config,
        trigger=kfp_server_api.V2beta1Trigger(cron_schedule=kfp_server_api.V2beta1CronSchedule(
            cron=check_cron(cron, "kfp"))),
        max_concurrency=1, no_catchup=True,
        service_account=cloud.kfp_service_account or None)


def create(cloud: settings.CloudConfig, target: str, cron: str, dry_run: bool,
           host: str = "", experiment: str = "", pipeline_file: str | None = None
           ) -> dict[str, Any]:
    """Creates the schedule (or, dry, builds it) and says what it is.

    Raises:
      ConfigError: a bad cron expression, no compiled file, no KFP endpoint.
    """
    pipeline_file = submit.compiled_pipeline_file(cloud, target, pipeline_file)
    if target == "vertex":
        schedule = vertex_schedule(cloud, pipeline_file, cron, dry_run)
        if dry_run:
            return describe_vertex(schedule)
        request = schedule._gca_resource
        schedule._gca_resource = schedule.api_client.create_schedule(
            parent=schedule._parent, schedule=request)
        return {"schedule": schedule.resource_name, "cron": request.cron}
    import kfp

    with tempfile.TemporaryDirectory() as tmp:
        package = submit.kfp_package(pipeline_file, tmp)
        if dry_run:
            offline = kfp.Client.__new__(kfp.Client)
            request = kfp_recurring_run(offline, cloud, package, cron,
                                        f"<id of experiment {experiment!r}>")
            return {"host": host, "experiment": experiment, "recurring_run": request.to_dict()}
        client = _kfp_client(host)
        experiment_id = client.create_experiment(experiment).experiment_id
        body = kfp_recurring_run(client, cloud, package, cron, experiment_id)
        result = client._recurring_run_api.recurring_run_service_create_recurring_run(body=body)
        return {"host": host, "recurring_run_id": result.recurring_run_id,
                "cron": body.trigger.cron_schedule.cron}


def _kfp_client(host: str):
    import kfp

    return kfp.Client(host=submit.kfp_host(host))


def listed(cloud: settings.CloudConfig, target: str, host: str = "") -> list[dict[str, str]]:
    """This pipeline's schedules: name or id, cron, state."""
    if target == "vertex":
        from google.cloud import aiplatform

        return [{"id": s.resource_name, "cron": s.cron, "state": s.state.name}
                for s in aiplatform.PipelineJobSchedule.list(
                    filter=f'display_name="{cloud.pipeline_name}-schedule"',
                    project=cloud.project, location=cloud.region)]
    runs = _kfp_client(host).list_recurring_runs(page_size=100).recurring_runs or []
    return [{"id": r.recurring_run_id, "cron": r.trigger.cron_schedule.cron,
             "state": str(r.status)} for r in runs
            if r.display_name == f"{cloud.pipeline_name}-schedule"]


def remove(cloud: settings.CloudConfig, target: str, schedule_id: str, host: str = "") -> None:
    """Deletes one schedule (runs it started are kept)."""
    if target == "vertex":
        from google.cloud import aiplatform

        aiplatform.PipelineJobSchedule(schedule_id, project=cloud.project,
                                       location=cloud.region).delete()
    else:
        _kfp_client(host).delete_recurring_run(schedule_id)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Schedule the compiled pipeline.")
    parser.add_argument("action", choices=("create", "list", "remove"))
    submit.add_job_arguments(parser)
    parser.add_argument("--cron", default=os.environ.get("CRON", ""),
                        help='five cron fields, e.g. "0 3 * * *" (every day at 03:00 UTC)')
    parser.add_argument("--id", help="the schedule to remove (see `list`)")
    args = parser.parse_args(argv)

    def body() -> Any:
        cloud = settings.load(args.config)
        host = args.host or cloud.kfp_host
        if args.action == "create":
            if not args.cron:
                raise ConfigError('no CRON: give five cron fields, e.g. CRON="0 3 * * *"')
            return create(cloud, args.target, args.cron, args.dry_run, host,
                          args.experiment or cloud.pipeline_name, args.pipeline_file)
        if args.action == "list":
            return listed(cloud, args.target, host)
        if not args.id:
            raise ConfigError("no ID: `make schedules` lists them; pass ID=<id>")
        remove(cloud, args.target, args.id, host)
        return {"removed": args.id}

    return submit.answer(body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
