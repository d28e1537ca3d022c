"""Live metrics: what a run measures, published while it runs (Prometheus, Pushgateway,
OTLP), labelled so that it joins with the GPU metrics fleets already collect."""
