"""disco_tracker."""
