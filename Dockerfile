# One image for every process of LocalAI Memory: web, worker, beat and bridges differ only in their command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY localai_memory ./localai_memory
COPY bridges ./bridges
COPY templates ./templates
COPY manage.py ./
RUN pip install -e . && useradd --system --home /app memory && mkdir -p /app/.localai && chown memory /app/.localai
USER memory
# The on-device embedder's faster copy of its model (int8 weights kept int8 at run time), made once here.
ENV LOCALAI_MEMORY_MODEL_CACHE=/app/.localai/models
RUN python -c "from localai_memory.recall.embedders import OnDeviceEmbedder; OnDeviceEmbedder().load()"
# collectstatic needs settings but no database or Redis: give it throwaway URLs.
RUN DATABASE_URL=postgresql://x@localhost/x REDIS_URL=redis://localhost:6379/0 SECRET_KEY=build-only-throwaway-key-0123456789abcdef \
    python manage.py collectstatic --noinput
EXPOSE 8000
# localai_memory/gunicorn_conf.py: the heartbeat file in memory, and a stopping worker finishes its queued work.
CMD ["gunicorn", "localai_memory.wsgi:application", "-c", "python:localai_memory.gunicorn_conf", \
     "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "8"]
