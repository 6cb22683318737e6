"""The queue's consumer: claims queued jobs, dispatches them to launchers and records results.

config.py     how a scheduler paces itself (leases, heartbeats, retries, run limits)
scheduler.py  claims jobs under a lease, renews it, adopts jobs whose lease expired
driver.py     one job's life: dispatch, follow, record, retry
hosted.py     a scheduler inside a front end's process, restarted after a crash
"""
