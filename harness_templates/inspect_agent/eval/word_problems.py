"""The example task (protected: the benchmark, not the harness): word problems with exact numeric answers.

`split` in each sample's metadata places it in train, dev or test; `family` groups them in reports.
"""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match

PROBLEMS = [
    ("eggs-1", "A baker uses 3 dozen eggs a day. How many eggs does she use in a week?", "252", "train", "units"),
    ("eggs-2", "A farm packs 5 gross of eggs. How many eggs is that?", "720", "train", "units"),
    ("time-1", "A film lasts 2 hours and 35 minutes. How many minutes is that?", "155", "train", "units"),
    ("shop-1", "Pens cost 4 dollars each. Sam buys 7 and pays with a 50 dollar note. What is his change?", "22",
     "train", "money"),
    ("shop-2", "A shirt costs 30 dollars and is discounted by 20 percent. What does it cost now?", "24", "train",
     "money"),
    ("age-1", "Ann is 3 times as old as Ben. Ben is 12. How old will Ann be in 5 years?", "41", "train", "ages"),
    ("rate-1", "A tap fills 12 litres a minute. How many litres in a quarter of an hour?", "180", "train", "rates"),
    ("rate-2", "A cyclist rides 18 km an hour for 2.5 hours. How far does she ride, in km?", "45", "train", "rates"),
    ("eggs-3", "How many eggs are in 4 score eggs?", "80", "dev", "units"),
    ("shop-3", "Apples cost 3 dollars a kilo. What do 7 kilos and a 5 dollar bag cost?", "26", "dev", "money"),
    ("age-2", "Cara is 8 years older than Dan, who is 19. How old was Cara 10 years ago?", "17", "dev", "ages"),
    ("rate-3", "A printer prints 40 pages a minute. How many pages in 2 hours?", "4800", "dev", "rates"),
    ("time-2", "How many hours are there in 3 weeks?", "504", "test", "units"),
    ("shop-4", "Five friends share a 120 dollar bill equally and each adds a 4 dollar tip. What does each pay?",
     "28", "test", "money"),
    ("age-3", "Eve is half as old as her mother, who is 64. How old will Eve be in 9 years?", "41", "test", "ages"),
    ("rate-4", "A pump moves 250 litres an hour. How many litres in 2 days?", "12000", "test", "rates"),
]


@task
def word_problems() -> Task:
    return Task(
        dataset=[
            Sample(id=pid, input=text, target=answer, metadata={"split": split, "family": family})
            for pid, text, answer, split, family in PROBLEMS
        ],
        scorer=match(numeric=True),
        message_limit=30,
    )
