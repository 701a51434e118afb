"""From the site file to what a deploy needs: the strict model built from the file, the facts derived from it, the plan, the rendered inventory."""
