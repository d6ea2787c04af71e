"""What the commands do, as functions: prepare the data (and a teacher's translations),
translate, evaluate, the attention lab's views, and tuning a recipe over many training runs."""
