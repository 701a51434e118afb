"""The shared core: the site's model, errors, host lists, files written safely, the console, YAML in and out."""
