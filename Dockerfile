# The CPU image; Dockerfile.cuda is the NVIDIA one. `bash scripts/container-check.sh` builds
# this file and proves the image (non-root, healthy, every route answers, SIGTERM drains).
#
#   docker build -t onnx-genai-server .                                  # the demo model
#   docker build --build-arg MODEL_DIR=models/my-model -t my-server .    # a model folder
#   docker build --build-arg BASE_IMAGE=localhost/python-debian:bookworm .
#
# BASE_IMAGE: any Debian-like image with Python 3.10+ as `python` (with venv), `useradd` and
# `sh`; scripts/container-base.sh builds one from Debian packages where no registry can be
# reached. pip's settings (index, CA bundle) may come in as the build secrets `pip.conf` and
# `pip-cert` (`--secret id=pip.conf,src=...`); secrets are never stored in the image.
ARG BASE_IMAGE=python:3.11-slim

# The application is the build context minus .dockerignore, so a new folder or module is in
# the image by construction. models/ is left out here: the served model goes in once, below.
FROM ${BASE_IMAGE} AS source
COPY . /src
RUN rm -rf /src/models

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH

# The runtime in its own environment: the same on an official python image and on a Debian
# python3 (whose system site-packages pip refuses to touch).
COPY requirements.txt /tmp/requirements.txt
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=pip-cert \
    python -m venv "$VIRTUAL_ENV" \
    && PIP_CONFIG_FILE=/run/secrets/pip.conf pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# A numeric user, so that Kubernetes' runAsNonRoot can verify it.
RUN useradd --no-log-init --create-home --uid 10001 --user-group genai

# The model baked into the image: a folder in the build context (default: the demo model).
ARG MODEL_DIR=models/demo-llama
COPY ${MODEL_DIR} /models/model

# Code and model stay root-owned and read-only to the server; profiles go to /tmp.
WORKDIR /app
COPY --from=source /src /app
USER 10001

ENV GENAI_MODEL_DIR=/models/model GENAI_PROFILE_DIR=/tmp/profiles HOST=0.0.0.0 PORT=8002
EXPOSE 8002
# The server drains on SIGTERM: in-flight requests get GENAI_SHUTDOWN_TIMEOUT (30 s) to finish;
# give `docker stop -t` / terminationGracePeriodSeconds a little more than that.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('PORT', '8002') + '/healthz', timeout=2)"]
CMD ["python", "main_genai.py"]
