-- The GPU types each live whole-queue scheduler serves: refreshed on its heartbeat, removed
-- when it stops cleanly; the rows of one that died age out. A job queued on a type that no
-- scheduler has served for a while fails with why, instead of waiting for good.
-- depends: 0016.ranked-pair-score

CREATE TABLE served_gpus (
    gpu     TEXT NOT NULL,
    owner   TEXT NOT NULL,  -- the scheduler, as it holds leases (jobs.lease_owner)
    seen_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (gpu, owner)
);
