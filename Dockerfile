# FeedFabric: one image for the API, the relay, the workers and the migration job.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1

WORKDIR /app

# The CPU build of torch, pinned: a range, or PyPI's default index, pulls a multi-GB CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

COPY pyproject.toml README.md ./
COPY feedfabric ./feedfabric
# feedfabric/playground is a symlink to it; the install copies the playground into the package.
COPY graphql-playground ./graphql-playground
RUN pip install ".[ml]"

RUN useradd --system --uid 10001 --home-dir /app feedfabric
USER feedfabric

EXPOSE 8000 9100
# The API's readiness; compose overrides this for the relay and workers (their metrics port).
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2).status == 200 else 1)"

ENTRYPOINT ["feedfabric"]
CMD ["api", "--host", "0.0.0.0", "--port", "8000"]
