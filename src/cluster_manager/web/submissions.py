"""A submission's page (its owner's, an admin's, or after the deadline anyone's for a ranked
one) and the form that submits a file from a leaderboard's page."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from cluster_manager.api.auth import signed_in
from cluster_manager.api.routes.popcorn import parse_mode
from cluster_manager.api.uploads import read_upload
from cluster_manager.core.models import DEFAULT_SUBMIT_MODE, Mode
from cluster_manager.rendering.reports import (
    format_submission_report,
    submission_outcome,
    verdict_text,
)
from cluster_manager.service import (
    NotFoundError,
    PermissionDeniedError,
    SubmissionReport,
    Submitter,
)
from cluster_manager.web import view_models
from cluster_manager.web.rendering import (
    PageRoute,
    check_same_origin,
    keep_private,
    login_redirect,
    render,
    service_of,
    visible_board,
)

router = APIRouter(include_in_schema=False, route_class=PageRoute)


@router.get("/submissions/{submission_id}")
async def submission(submission_id: int, request: Request) -> Response:
    service = service_of(request)
    viewer = await signed_in(request)
    user, admin = (viewer.user, viewer.admin) if viewer else (None, False)
    try:
        report = await service.history.visible_report(submission_id, user, admin=admin)
    except NotFoundError:
        if viewer is None:
            return login_redirect(request)
        raise
    stored = report.submission
    owner = admin or (user is not None and user.external_id == stored.user)
    outcome = submission_outcome(report)
    # Its author's or an admin's view holds the code and output: never cached.
    return keep_private(
        await render(
            request,
            "submission.html",
            stored=stored,
            owner=owner,
            submitted=view_models.when_text(stored.submitted_at),
            done=report.done,
            outcome=outcome,
            outcome_text=verdict_text(outcome),
            jobs=view_models.job_lines(
                report.jobs, report.runs, await places_in_line(request, report) if owner else {}
            ),
            placements=await placements_of(request, report),
            runs=[view_models.run_view(r) for r in report.runs],
            report_text=format_submission_report(report, with_output=owner) if owner else "",
        )
    )


async def placements_of(request: Request, report: SubmissionReport) -> list[tuple[str, str]]:
    """Per GPU, where a ranked submission stands once its runs are done, and in which
    ranking: the competition's or that of the runs after the deadline."""
    if report.submission.mode is not Mode.LEADERBOARD or not report.done:
        return []
    placements = await service_of(request).submissions.placements(report.submission.id)
    return [(p.gpu, view_models.placement_text(p)) for p in placements if p.rank is not None]


async def places_in_line(request: Request, report: SubmissionReport) -> dict[int, int | None]:
    """Each of the submission's waiting jobs' place in its GPU's line."""
    if report.done:
        return {}
    author = Submitter(report.submission.user, report.submission.user)
    view = await service_of(request).queues.view(author)
    return {j.job_id: j.position for j in view.mine if j.submission_id == report.submission.id}


@router.post("/leaderboards/{name}/submit")
async def submit(name: str, request: Request) -> Response:
    """The leaderboard page's form: the same service call and rules as every front end."""
    check_same_origin(request)
    viewer = await signed_in(request)
    if viewer is None:
        return login_redirect(request)
    if viewer.user is None:
        raise PermissionDeniedError("the admin acts for no user: sign in with a user's token")
    service = service_of(request)
    # An unknown board, or one hidden from the user, is refused before the upload is read.
    await visible_board(request, name)
    upload = await read_upload(request, service.submissions.max_bytes)
    receipt = await service.submissions.submit(
        name,
        viewer.user,
        upload.file_name,
        upload.data,
        gpus=[upload.fields.get("gpu", "")] if upload.fields.get("gpu") else None,
        mode=parse_mode(upload.fields.get("mode", DEFAULT_SUBMIT_MODE.value)),
    )
    return RedirectResponse(f"/submissions/{receipt.submission_id}", status_code=303)
