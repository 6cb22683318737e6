-- The schema the migrations in src/cluster_manager/data/migrations/ make, as pg_dump writes it,
-- one table after another. Written by `make schema`; tests/storage/test_schema.py checks it.
-- It is for reading: a database is made by the migrations, never from this file.


-- announced_leaders ---------------------------------------------------------------------------

CREATE TABLE public.announced_leaders (
    leaderboard_id bigint NOT NULL,
    gpu text NOT NULL,
    leaders jsonb NOT NULL,
    announced_at timestamp with time zone NOT NULL
);

ALTER TABLE ONLY public.announced_leaders
    ADD CONSTRAINT announced_leaders_pkey PRIMARY KEY (leaderboard_id, gpu);

ALTER TABLE ONLY public.announced_leaders
    ADD CONSTRAINT announced_leaders_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;


-- api_tokens ----------------------------------------------------------------------------------

CREATE TABLE public.api_tokens (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    token_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone
);

CREATE SEQUENCE public.api_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.api_tokens_id_seq OWNED BY public.api_tokens.id;

ALTER TABLE ONLY public.api_tokens ALTER COLUMN id SET DEFAULT nextval('public.api_tokens_id_seq'::regclass);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash);

CREATE UNIQUE INDEX api_tokens_one_live_per_user ON public.api_tokens USING btree (user_id) WHERE (revoked_at IS NULL);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;


-- code_files ----------------------------------------------------------------------------------

CREATE TABLE public.code_files (
    id bigint NOT NULL,
    sha256 text NOT NULL,
    code text NOT NULL
);

CREATE SEQUENCE public.code_files_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.code_files_id_seq OWNED BY public.code_files.id;

ALTER TABLE ONLY public.code_files ALTER COLUMN id SET DEFAULT nextval('public.code_files_id_seq'::regclass);

ALTER TABLE ONLY public.code_files
    ADD CONSTRAINT code_files_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.code_files
    ADD CONSTRAINT code_files_sha256_key UNIQUE (sha256);


-- discord_follows -----------------------------------------------------------------------------

CREATE TABLE public.discord_follows (
    submission_id bigint NOT NULL,
    member_id bigint NOT NULL,
    channel_id bigint NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY public.discord_follows
    ADD CONSTRAINT discord_follows_pkey PRIMARY KEY (submission_id);

ALTER TABLE ONLY public.discord_follows
    ADD CONSTRAINT discord_follows_submission_id_fkey FOREIGN KEY (submission_id) REFERENCES public.submissions(id) ON DELETE CASCADE;


-- ended_job_totals ----------------------------------------------------------------------------

CREATE TABLE public.ended_job_totals (
    gpu text NOT NULL,
    launcher text NOT NULL,
    outcome text NOT NULL,
    jobs bigint NOT NULL
);

ALTER TABLE ONLY public.ended_job_totals
    ADD CONSTRAINT ended_job_totals_pkey PRIMARY KEY (gpu, launcher, outcome);


-- installation --------------------------------------------------------------------------------

CREATE TABLE public.installation (
    only_row boolean DEFAULT true NOT NULL,
    id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT installation_id_check CHECK ((id ~ '^[a-z0-9]{8,32}$'::text)),
    CONSTRAINT installation_only_row_check CHECK (only_row)
);

ALTER TABLE ONLY public.installation
    ADD CONSTRAINT installation_pkey PRIMARY KEY (only_row);


-- invites -------------------------------------------------------------------------------------

CREATE TABLE public.invites (
    code text NOT NULL,
    leaderboard_id bigint NOT NULL,
    max_uses integer NOT NULL,
    uses integer DEFAULT 0 NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT invites_check CHECK ((uses <= max_uses)),
    CONSTRAINT invites_max_uses_check CHECK ((max_uses > 0))
);

ALTER TABLE ONLY public.invites
    ADD CONSTRAINT invites_pkey PRIMARY KEY (code);

CREATE INDEX invites_board ON public.invites USING btree (leaderboard_id, created_at);

ALTER TABLE ONLY public.invites
    ADD CONSTRAINT invites_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;


-- jobs ----------------------------------------------------------------------------------------

CREATE TABLE public.jobs (
    id bigint NOT NULL,
    submission_id bigint NOT NULL,
    gpu text NOT NULL,
    mode text NOT NULL,
    secret boolean DEFAULT false NOT NULL,
    state text DEFAULT 'queued'::text NOT NULL,
    launcher text,
    external_id text,
    attempts integer DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_expires_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_at timestamp with time zone,
    dispatched_at timestamp with time zone,
    finished_at timestamp with time zone,
    error text,
    rerun integer DEFAULT 0 NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    retry_of integer,
    CONSTRAINT jobs_mode_check CHECK ((mode = ANY (ARRAY['test'::text, 'benchmark'::text, 'leaderboard'::text, 'profile'::text]))),
    CONSTRAINT jobs_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'dispatched'::text, 'finished'::text, 'failed'::text])))
);

CREATE SEQUENCE public.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.jobs_id_seq OWNED BY public.jobs.id;

ALTER TABLE ONLY public.jobs ALTER COLUMN id SET DEFAULT nextval('public.jobs_id_seq'::regclass);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_one_per_generation UNIQUE (submission_id, gpu, mode, secret, rerun);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

CREATE INDEX jobs_active ON public.jobs USING btree (gpu) WHERE (state = ANY (ARRAY['claimed'::text, 'dispatched'::text]));

CREATE INDEX jobs_leases ON public.jobs USING btree (lease_expires_at) WHERE (state = ANY (ARRAY['claimed'::text, 'dispatched'::text]));

CREATE INDEX jobs_queued ON public.jobs USING btree (gpu, priority, id) WHERE (state = 'queued'::text);

CREATE INDEX jobs_submission ON public.jobs USING btree (submission_id);

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_submission_id_fkey FOREIGN KEY (submission_id) REFERENCES public.submissions(id) ON DELETE CASCADE;


-- leaderboard_gpus ----------------------------------------------------------------------------

CREATE TABLE public.leaderboard_gpus (
    leaderboard_id bigint NOT NULL,
    gpu text NOT NULL
);

ALTER TABLE ONLY public.leaderboard_gpus
    ADD CONSTRAINT leaderboard_gpus_pkey PRIMARY KEY (leaderboard_id, gpu);

ALTER TABLE ONLY public.leaderboard_gpus
    ADD CONSTRAINT leaderboard_gpus_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;


-- leaderboard_members -------------------------------------------------------------------------

CREATE TABLE public.leaderboard_members (
    leaderboard_id bigint NOT NULL,
    user_id bigint NOT NULL,
    invite_code text,
    joined_at timestamp with time zone NOT NULL
);

ALTER TABLE ONLY public.leaderboard_members
    ADD CONSTRAINT leaderboard_members_pkey PRIMARY KEY (leaderboard_id, user_id);

ALTER TABLE ONLY public.leaderboard_members
    ADD CONSTRAINT leaderboard_members_invite_code_fkey FOREIGN KEY (invite_code) REFERENCES public.invites(code) ON DELETE SET NULL;

ALTER TABLE ONLY public.leaderboard_members
    ADD CONSTRAINT leaderboard_members_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.leaderboard_members
    ADD CONSTRAINT leaderboard_members_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;


-- leaderboards --------------------------------------------------------------------------------

CREATE TABLE public.leaderboards (
    id bigint NOT NULL,
    name text NOT NULL,
    deadline timestamp with time zone NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    task jsonb NOT NULL,
    creator_id bigint,
    secret_seed bigint NOT NULL,
    rate_limit_per_hour integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    history_version bigint DEFAULT 0 NOT NULL,
    closed boolean DEFAULT false NOT NULL,
    channel_policy text DEFAULT 'ranked'::text NOT NULL,
    channel_policy_set_by text,
    channel_policy_set_at timestamp with time zone,
    after_deadline_runs boolean DEFAULT true NOT NULL,
    after_deadline_runs_set_by text,
    after_deadline_runs_set_at timestamp with time zone,
    team_size integer DEFAULT 4 NOT NULL,
    team_quotas boolean DEFAULT false NOT NULL,
    CONSTRAINT leaderboards_channel_policy_check CHECK ((channel_policy = ANY (ARRAY['ranked'::text, 'none'::text, 'all'::text]))),
    CONSTRAINT leaderboards_rate_limit_per_hour_check CHECK ((rate_limit_per_hour > 0)),
    CONSTRAINT leaderboards_team_size_check CHECK (((team_size >= 1) AND (team_size <= 100)))
);

CREATE SEQUENCE public.leaderboards_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.leaderboards_id_seq OWNED BY public.leaderboards.id;

ALTER TABLE ONLY public.leaderboards ALTER COLUMN id SET DEFAULT nextval('public.leaderboards_id_seq'::regclass);

ALTER TABLE ONLY public.leaderboards
    ADD CONSTRAINT leaderboards_name_key UNIQUE (name);

ALTER TABLE ONLY public.leaderboards
    ADD CONSTRAINT leaderboards_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.leaderboards
    ADD CONSTRAINT leaderboards_creator_id_fkey FOREIGN KEY (creator_id) REFERENCES public.users(id) ON DELETE SET NULL;


-- ranking_events ------------------------------------------------------------------------------

CREATE TABLE public.ranking_events (
    id bigint NOT NULL,
    leaderboard_id bigint NOT NULL,
    gpu text NOT NULL,
    user_id bigint NOT NULL,
    submission_id bigint NOT NULL,
    score double precision NOT NULL,
    ranked_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.ranking_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.ranking_events_id_seq OWNED BY public.ranking_events.id;

ALTER TABLE ONLY public.ranking_events ALTER COLUMN id SET DEFAULT nextval('public.ranking_events_id_seq'::regclass);

ALTER TABLE ONLY public.ranking_events
    ADD CONSTRAINT ranking_events_pkey PRIMARY KEY (id);

CREATE INDEX ranking_events_board ON public.ranking_events USING btree (leaderboard_id, gpu, id);

ALTER TABLE ONLY public.ranking_events
    ADD CONSTRAINT ranking_events_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.ranking_events
    ADD CONSTRAINT ranking_events_submission_id_fkey FOREIGN KEY (submission_id) REFERENCES public.submissions(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.ranking_events
    ADD CONSTRAINT ranking_events_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);


-- rankings ------------------------------------------------------------------------------------

CREATE TABLE public.rankings (
    leaderboard_id bigint NOT NULL,
    gpu text NOT NULL,
    user_id bigint NOT NULL,
    submission_id bigint NOT NULL,
    score double precision NOT NULL,
    submitted_at timestamp with time zone NOT NULL,
    after_deadline boolean DEFAULT false NOT NULL
);

ALTER TABLE ONLY public.rankings
    ADD CONSTRAINT rankings_pkey PRIMARY KEY (leaderboard_id, gpu, user_id, after_deadline);

CREATE INDEX rankings_order ON public.rankings USING btree (leaderboard_id, gpu, after_deadline, score, submitted_at, submission_id) INCLUDE (user_id);

CREATE INDEX rankings_submission ON public.rankings USING btree (submission_id);

ALTER TABLE ONLY public.rankings
    ADD CONSTRAINT rankings_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.rankings
    ADD CONSTRAINT rankings_submission_id_fkey FOREIGN KEY (submission_id) REFERENCES public.submissions(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.rankings
    ADD CONSTRAINT rankings_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);


-- run_seconds_totals --------------------------------------------------------------------------

CREATE TABLE public.run_seconds_totals (
    gpu text NOT NULL,
    le double precision NOT NULL,
    runs bigint NOT NULL,
    total_us bigint NOT NULL
);

ALTER TABLE ONLY public.run_seconds_totals
    ADD CONSTRAINT run_seconds_totals_pkey PRIMARY KEY (gpu, le);


-- runs ----------------------------------------------------------------------------------------

CREATE TABLE public.runs (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    submission_id bigint NOT NULL,
    leaderboard_id bigint NOT NULL,
    user_id bigint NOT NULL,
    gpu text NOT NULL,
    mode text NOT NULL,
    secret boolean NOT NULL,
    passed boolean NOT NULL,
    verdict text NOT NULL,
    score double precision,
    result jsonb NOT NULL,
    system jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.runs_id_seq OWNED BY public.runs.id;

ALTER TABLE ONLY public.runs ALTER COLUMN id SET DEFAULT nextval('public.runs_id_seq'::regclass);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_job_id_key UNIQUE (job_id);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);

CREATE INDEX runs_personal ON public.runs USING btree (leaderboard_id, user_id, created_at);

CREATE INDEX runs_submission ON public.runs USING btree (submission_id, gpu);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_submission_id_fkey FOREIGN KEY (submission_id) REFERENCES public.submissions(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);


-- script_runs ---------------------------------------------------------------------------------

CREATE TABLE public.script_runs (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    gpu text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    lease_expires_at timestamp with time zone,
    finished_at timestamp with time zone
);

CREATE SEQUENCE public.script_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.script_runs_id_seq OWNED BY public.script_runs.id;

ALTER TABLE ONLY public.script_runs ALTER COLUMN id SET DEFAULT nextval('public.script_runs_id_seq'::regclass);

ALTER TABLE ONLY public.script_runs
    ADD CONSTRAINT script_runs_pkey PRIMARY KEY (id);

CREATE INDEX script_runs_active ON public.script_runs USING btree (gpu) WHERE (finished_at IS NULL);

CREATE INDEX script_runs_rate_limit ON public.script_runs USING btree (user_id, started_at);

ALTER TABLE ONLY public.script_runs
    ADD CONSTRAINT script_runs_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);


-- served_gpus ---------------------------------------------------------------------------------

CREATE TABLE public.served_gpus (
    gpu text NOT NULL,
    owner text NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY public.served_gpus
    ADD CONSTRAINT served_gpus_pkey PRIMARY KEY (gpu, owner);


-- submission_pauses ---------------------------------------------------------------------------

CREATE TABLE public.submission_pauses (
    id bigint NOT NULL,
    leaderboard_id bigint,
    reason text NOT NULL,
    paused_by text NOT NULL,
    paused_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.submission_pauses_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.submission_pauses_id_seq OWNED BY public.submission_pauses.id;

ALTER TABLE ONLY public.submission_pauses ALTER COLUMN id SET DEFAULT nextval('public.submission_pauses_id_seq'::regclass);

ALTER TABLE ONLY public.submission_pauses
    ADD CONSTRAINT submission_pauses_pkey PRIMARY KEY (id);

CREATE UNIQUE INDEX submission_pauses_scope ON public.submission_pauses USING btree (COALESCE(leaderboard_id, (0)::bigint));

ALTER TABLE ONLY public.submission_pauses
    ADD CONSTRAINT submission_pauses_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;


-- submissions ---------------------------------------------------------------------------------

CREATE TABLE public.submissions (
    id bigint NOT NULL,
    leaderboard_id bigint NOT NULL,
    user_id bigint NOT NULL,
    file_name text NOT NULL,
    code_id bigint NOT NULL,
    mode text NOT NULL,
    submitted_at timestamp with time zone DEFAULT now() NOT NULL,
    profile_benchmark integer,
    invalidated_at timestamp with time zone,
    invalidated_by text,
    invalidation_reason text,
    profile_options jsonb,
    after_deadline boolean DEFAULT false NOT NULL,
    CONSTRAINT submissions_mode_check CHECK ((mode = ANY (ARRAY['test'::text, 'benchmark'::text, 'leaderboard'::text, 'profile'::text]))),
    CONSTRAINT submissions_profile_benchmark_check CHECK ((profile_benchmark >= 0))
);

CREATE SEQUENCE public.submissions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.submissions_id_seq OWNED BY public.submissions.id;

ALTER TABLE ONLY public.submissions ALTER COLUMN id SET DEFAULT nextval('public.submissions_id_seq'::regclass);

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_pkey PRIMARY KEY (id);

CREATE INDEX submissions_invalidated ON public.submissions USING btree (id) WHERE (invalidated_at IS NOT NULL);

CREATE INDEX submissions_leaderboard ON public.submissions USING btree (leaderboard_id);

CREATE INDEX submissions_rate_limit ON public.submissions USING btree (user_id, leaderboard_id, submitted_at);

CREATE INDEX submissions_user_time ON public.submissions USING btree (user_id, submitted_at);

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_code_id_fkey FOREIGN KEY (code_id) REFERENCES public.code_files(id);

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.submissions
    ADD CONSTRAINT submissions_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);


-- team_invites --------------------------------------------------------------------------------

CREATE TABLE public.team_invites (
    code text NOT NULL,
    team_id bigint NOT NULL,
    created_by bigint NOT NULL,
    created_at timestamp with time zone NOT NULL
);

ALTER TABLE ONLY public.team_invites
    ADD CONSTRAINT team_invites_pkey PRIMARY KEY (code);

ALTER TABLE ONLY public.team_invites
    ADD CONSTRAINT team_invites_created_by_fkey FOREIGN KEY (created_by) REFERENCES public.users(id);

ALTER TABLE ONLY public.team_invites
    ADD CONSTRAINT team_invites_team_id_fkey FOREIGN KEY (team_id) REFERENCES public.teams(id) ON DELETE CASCADE;


-- team_members --------------------------------------------------------------------------------

CREATE TABLE public.team_members (
    leaderboard_id bigint NOT NULL,
    user_id bigint NOT NULL,
    team_id bigint NOT NULL,
    joined_at timestamp with time zone NOT NULL,
    id bigint NOT NULL,
    left_at timestamp with time zone,
    CONSTRAINT team_members_left_after_joining CHECK ((left_at >= joined_at))
);

CREATE SEQUENCE public.team_members_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.team_members_id_seq OWNED BY public.team_members.id;

ALTER TABLE ONLY public.team_members ALTER COLUMN id SET DEFAULT nextval('public.team_members_id_seq'::regclass);

ALTER TABLE ONLY public.team_members
    ADD CONSTRAINT team_members_pkey PRIMARY KEY (id);

CREATE UNIQUE INDEX team_members_current ON public.team_members USING btree (leaderboard_id, user_id) WHERE (left_at IS NULL);

CREATE INDEX team_members_team ON public.team_members USING btree (team_id);

CREATE INDEX team_members_user ON public.team_members USING btree (leaderboard_id, user_id, joined_at);

ALTER TABLE ONLY public.team_members
    ADD CONSTRAINT team_members_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.team_members
    ADD CONSTRAINT team_members_team_id_fkey FOREIGN KEY (team_id) REFERENCES public.teams(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.team_members
    ADD CONSTRAINT team_members_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);


-- teams ---------------------------------------------------------------------------------------

CREATE TABLE public.teams (
    id bigint NOT NULL,
    leaderboard_id bigint NOT NULL,
    name text NOT NULL,
    created_by bigint NOT NULL,
    created_at timestamp with time zone NOT NULL,
    disbanded_at timestamp with time zone
);

CREATE SEQUENCE public.teams_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.teams_id_seq OWNED BY public.teams.id;

ALTER TABLE ONLY public.teams ALTER COLUMN id SET DEFAULT nextval('public.teams_id_seq'::regclass);

ALTER TABLE ONLY public.teams
    ADD CONSTRAINT teams_pkey PRIMARY KEY (id);

CREATE UNIQUE INDEX teams_live_name ON public.teams USING btree (leaderboard_id, lower(name)) WHERE (disbanded_at IS NULL);

ALTER TABLE ONLY public.teams
    ADD CONSTRAINT teams_created_by_fkey FOREIGN KEY (created_by) REFERENCES public.users(id);

ALTER TABLE ONLY public.teams
    ADD CONSTRAINT teams_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;


-- templates -----------------------------------------------------------------------------------

CREATE TABLE public.templates (
    leaderboard_id bigint NOT NULL,
    language text NOT NULL,
    code text NOT NULL
);

ALTER TABLE ONLY public.templates
    ADD CONSTRAINT templates_pkey PRIMARY KEY (leaderboard_id, language);

ALTER TABLE ONLY public.templates
    ADD CONSTRAINT templates_leaderboard_id_fkey FOREIGN KEY (leaderboard_id) REFERENCES public.leaderboards(id) ON DELETE CASCADE;


-- user_bans -----------------------------------------------------------------------------------

CREATE TABLE public.user_bans (
    user_id bigint NOT NULL,
    reason text NOT NULL,
    banned_by text NOT NULL,
    banned_at timestamp with time zone NOT NULL
);

ALTER TABLE ONLY public.user_bans
    ADD CONSTRAINT user_bans_pkey PRIMARY KEY (user_id);

ALTER TABLE ONLY public.user_bans
    ADD CONSTRAINT user_bans_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;


-- user_quotas ---------------------------------------------------------------------------------

CREATE TABLE public.user_quotas (
    user_id bigint NOT NULL,
    per_hour integer,
    daily integer,
    set_by text NOT NULL,
    set_at timestamp with time zone NOT NULL,
    CONSTRAINT user_quotas_daily_check CHECK ((daily > 0)),
    CONSTRAINT user_quotas_per_hour_check CHECK ((per_hour > 0))
);

ALTER TABLE ONLY public.user_quotas
    ADD CONSTRAINT user_quotas_pkey PRIMARY KEY (user_id);

ALTER TABLE ONLY public.user_quotas
    ADD CONSTRAINT user_quotas_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;


-- users ---------------------------------------------------------------------------------------

CREATE TABLE public.users (
    id bigint NOT NULL,
    external_id text NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.users_id_seq OWNED BY public.users.id;

ALTER TABLE ONLY public.users ALTER COLUMN id SET DEFAULT nextval('public.users_id_seq'::regclass);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_external_id_key UNIQUE (external_id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);


-- web_sessions --------------------------------------------------------------------------------

CREATE TABLE public.web_sessions (
    id_hash bytea NOT NULL,
    token_id bigint,
    admin_token_hash bytea,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT web_sessions_check CHECK (((token_id IS NULL) <> (admin_token_hash IS NULL)))
);

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT web_sessions_pkey PRIMARY KEY (id_hash);

CREATE INDEX web_sessions_expiry ON public.web_sessions USING btree (expires_at);

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT web_sessions_token_id_fkey FOREIGN KEY (token_id) REFERENCES public.api_tokens(id) ON DELETE CASCADE;
