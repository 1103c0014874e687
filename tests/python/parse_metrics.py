"""Parses an OpenMetrics exposition from stdin with the Prometheus project's own
Python parser (strict: a malformed line, a missing `# EOF`, a sample outside
its family all fail), and prints the families as JSON on stdout:
[{"name", "type", "unit", "samples": [{"name", "labels", "value"}]}]."""

import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

families = [
    {
        "name": family.name,
        "type": family.type,
        "unit": family.unit,
        "samples": [
            {"name": sample.name, "labels": sample.labels, "value": sample.value} for sample in family.samples
        ],
    }
    for family in text_string_to_metric_families(sys.stdin.read())
]
json.dump(families, sys.stdout)
