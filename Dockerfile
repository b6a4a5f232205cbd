# CPU image. For CUDA, start FROM an nvidia/cuda runtime image and install
# onnxruntime-genai-cuda instead of onnxruntime-genai.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY app_onnx_genai.py main_genai.py ./
COPY backends ./backends
COPY schemas ./schemas
COPY metrics ./metrics
COPY routes ./routes
COPY in_process ./in_process

# The model baked into the image: a folder in the build context (default: the demo model).
ARG MODEL_DIR=models/demo-llama
COPY ${MODEL_DIR} /models/model

RUN useradd --create-home --uid 10001 genai && chown -R genai /app
USER genai

ENV GENAI_MODEL_DIR=/models/model HOST=0.0.0.0 PORT=8002
EXPOSE 8002
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"PORT\", \"8002\")}/healthz', timeout=2)"
CMD ["python", "main_genai.py"]
