"""Lambda function code: one package per function (the CodeUri of each in template.yaml)."""
