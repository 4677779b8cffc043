"""Integrations with other projects, each on its own extra: ``gq[sentry]``
(gq.contrib.sentry), ``gq[otel]`` (gq.contrib.otel), ``gq[django]`` (gq.contrib.django).
Each plugs in through the app's hooks (gq.tasks.hooks) and nothing else."""
