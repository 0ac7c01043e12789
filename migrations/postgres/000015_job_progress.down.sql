DROP TABLE IF EXISTS job_progress;
