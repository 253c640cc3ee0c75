"""The held-out cases of the quality benches.

The chat pairs were written on 2026-11-26 (session 32) in new words, the tasks earlier that
day. The sets these replace were read while changes were made (a failure once looked at is
no longer held out), so they became tuning sets: ``bench/chat_quality.py``'s
``*_PAIRS`` and ``bench/task_quality.py``'s ``TUNING_*``. Nothing in the service (prompt,
parser, check or threshold) is tried on the cases below, and their per-case lines are not
read before a final run; once one is read to understand a failure, write a fresh set.

The chat pairs ask in other words than the fact was told ("Who does my accounts?" after
"My accountant is Ms. Drummond."), some without "my"; six ask about something
the user never said (the right answer says it does not know), and six tell a fact and
then its update (the update is the answer).
"""

# (told, question, answer): ``told`` is one message or a few told in turn (a fact, then its
# update); the answer must appear in the reply (case-insensitive). ``answer`` None: the
# user never said it, and the only right reply says it does not know.
# Written 2026-11-26 (session 32) in new words, before the changes measured on them.
CHAT_PAIRS = [
    ("My piano is an old Bechstein.", "What make is the piano I own?", "Bechstein"),
    ("Our allotment is plot 27.", "Which plot number do we rent?", "27"),
    (
        "I've booked a cooking course in Bologna.",
        "Where is the cookery class I signed up for?",
        "Bologna",
    ),
    ("My goddaughter is called Philippa.", "What's my goddaughter's name?", "Philippa"),
    ("The boiler engineer comes on Friday.", "When is the heating man visiting?", "Friday"),
    ("My favourite cheese is Stilton.", "Which cheese do I like best?", "Stilton"),
    ("I coach an under-12 rugby team.", "What sport do I coach?", "rugby"),
    ("Our holiday cottage is in Connemara.", "Where is our holiday cottage?", "Connemara"),
    ("My stepson is studying architecture.", "What is my stepson's subject?", "architecture"),
    ("The bike lock combination is 6381.", "What numbers open the bike lock?", "6381"),
    ("My accountant is Ms. Drummond.", "Who does my accounts?", "Drummond"),
    ("I brew my own cider.", "What drink do I make at home?", "cider"),
    ("My grandmother was a seamstress.", "What was granny's job?", "seamstress"),
    ("We planted a walnut tree in the garden.", "Which tree did we plant?", "walnut"),
    ("I sing tenor in the church choir.", "Which voice part do I sing?", "tenor"),
    ("My phone's case is orange.", "What colour is my phone case?", "orange"),
    (
        "Our neighbour's parrot is called Captain.",
        "What is the neighbour's parrot called?",
        "Captain",
    ),
    ("I did my degree in Aberdeen.", "Which city did I study in?", "Aberdeen"),
    # Never said: "I don't know" is the right answer.
    ("My husband works in insurance.", "What does my wife do?", None),
    ("I have two rabbits.", "What are my hamsters called?", None),
    ("My niece lives in Cardiff.", "How old is my niece?", None),
    ("I play chess on Sundays.", "Who is my chess partner?", None),
    ("Our kitchen has a gas hob.", "What brand is our fridge?", None),
    ("I went to Crete last summer.", "Which hotel did I stay at in Rome?", None),
    # A fact, then its update: the update is the answer.
    (
        ("My book club meets at Anna's house.", "The book club meets at the library from now on."),
        "Where does my book club meet?",
        "library",
    ),
    (
        ("My pension starts at 66.", "I checked again: my pension starts at 67."),
        "At what age does my pension start?",
        "67",
    ),
    (
        ("I'm vegetarian.", "I've gone fully vegan since January."),
        "What diet do I follow?",
        "vegan",
    ),
    (
        ("My swimming lesson is at 6 pm.", "The pool moved my swimming lesson to 8 pm."),
        "What time is my swimming lesson?",
        "8",
    ),
    (
        ("Our cleaner is Dorota.", "Dorota stopped working for us; our new cleaner is Agnieszka."),
        "Who cleans for us now?",
        "Agnieszka",
    ),
    (
        ("I work at the post office.", "I quit the post office and started at a garden centre."),
        "Where do I work?",
        "garden centre",
    ),
]

# Written 2026-11-26 (session 30) in new words; their per-pair lines were read at the end of
# that session, so they are tuning pairs now (``bench/chat_quality.py``'s ALL_TUNING_PAIRS).
SESSION_30_PAIRS = [
    (
        "I've been learning Japanese for two years.",
        "Remind me, which language am I studying?",
        "Japanese",
    ),
    ("My landlady's name is Mrs. Abernathy.", "Who do I rent from?", "Abernathy"),
    ("I'm flying to Reykjavik next week.", "Where am I travelling next week?", "Reykjavik"),
    ("My shoe size is 44.", "What size shoes do I wear?", "44"),
    (
        "The vet said Rufus needs his vaccine in March.",
        "When is Rufus due for his vaccine?",
        "March",
    ),
    ("My oldest friend, Benedikt, is a firefighter.", "What does Benedikt do?", "firefighter"),
    ("I bought a kayak made of bamboo.", "What material is my kayak?", "bamboo"),
    (
        "My grandmother's recipe uses cardamom.",
        "Which spice goes into grandma's recipe?",
        "cardamom",
    ),
    ("We adopted a greyhound called Juniper.", "What's our greyhound's name?", "Juniper"),
    ("I keep the tax papers in a red folder.", "Where are my tax papers?", "folder"),
    ("My commute takes 35 minutes.", "How long is my commute?", "35"),
    ("I support the football club Celtic.", "Which club do I support?", "Celtic"),
    ("My stepfather is a locksmith.", "What's my stepfather's trade?", "locksmith"),
    ("I practise judo on Saturday mornings.", "Which martial art do I do?", "judo"),
    ("The code for the garage is 2708.", "Can you remind me of the garage code?", "2708"),
    ("My favourite author is Ishiguro.", "Which writer's books do I love?", "Ishiguro"),
    ("My daughter's teacher is Mr. Adeyemi.", "Who teaches my daughter?", "Adeyemi"),
    ("I'm saving up for a trip to Patagonia.", "What am I saving money for?", "Patagonia"),
    # Never said: "I don't know" is the right answer.
    ("My brother lives in Leeds.", "Where does my sister live?", None),
    ("I have a cat named Saffron.", "What is my dog's name?", None),
    ("My train to Glasgow leaves at 7.", "What's my seat number on the train?", None),
    ("I work at a bookshop.", "In which town is the bookshop I work at?", None),
    ("My son plays the drums.", "What instrument does my daughter play?", None),
    ("My car is a grey Skoda.", "What is my car's registration number?", None),
    # A fact, then its update: the update is the answer.
    (
        (
            "My haircut is booked for Tuesday.",
            "The salon called: my haircut is now on Thursday instead.",
        ),
        "What day is my haircut?",
        "Thursday",
    ),
    (
        (
            "My new colleague is called Pieter.",
            "Sorry, I misheard: my new colleague is called Pavel.",
        ),
        "What's my new colleague's name?",
        "Pavel",
    ),
    (
        ("I used to live in Bristol.", "Last month I moved to Dundee."),
        "Where do I live now?",
        "Dundee",
    ),
    (
        ("The alarm code at work is 5512.", "They reset the alarm code at work to 9034."),
        "What's the alarm code at work?",
        "9034",
    ),
    (
        ("My sister's wedding is in June.", "The wedding has been pushed back to September."),
        "When is my sister's wedding?",
        "September",
    ),
    (
        ("I drive a Peugeot.", "I sold the Peugeot and bought a Mazda."),
        "What car do I have now?",
        "Mazda",
    ),
]

# A newcomer's first turns: self-introductions, statements and small talk, each list one
# conversation told turn by turn (``bench/newcomer.py``). The right reply answers as the
# assistant: it never takes the user's name or job, nor a name, job or life of its own.
# Written 2026-11-26 (session 31) in new words, before the changes measured on them.
NEWCOMER_TALKS = [
    [
        "Hello! My name is Tobias and I'm a carpenter.",
        "I just moved to a small village by the coast.",
        "The weather here has been windy all week.",
        "Anyway, nice to chat with you.",
    ],
    [
        "Good evening. I'm Priyanka.",
        "I teach maths at a secondary school.",
        "Today the students sat their final exams.",
        "I'm looking forward to the holidays.",
    ],
    [
        "Hey, I'm Oluwaseun, but everyone calls me Seun.",
        "I work nights as a security guard.",
        "My shift starts at ten.",
        "I listen to podcasts during the quiet hours.",
    ],
    [
        "Hi! Ingrid here, a retired librarian.",
        "I've got three grandchildren.",
        "We baked cinnamon buns together yesterday.",
        "They ate most of them before dinner.",
    ],
    [
        "Morning! I'm Marco and I run a little pizzeria.",
        "Saturday night was really busy.",
        "We sold over two hundred pizzas.",
        "Now I need a long nap.",
    ],
    [
        "Hello there, this is Keiko. I'm new here.",
        "I design websites for a living.",
        "My cat keeps walking across my keyboard.",
        "Just wanted to say hi.",
    ],
]

# (task, exact result)
ARITHMETIC = [
    ("Add 23 to 58, then take away 11.", 70),
    ("What is 30% of 90?", 27),
    ("How much is a quarter of 120?", 30),
    ("Multiply 9 by 13.", 117),
    ("What do you get when you divide 96 by 8?", 12),
    ("Take 45 away from 100.", 55),
    ("What is 15 plus 27 plus 3?", 45),
    ("Triple 14, then add 6.", 48),
    ("What is eight times nine?", 72),
    ("What is 2 to the power of 6?", 64),
    ("What is one fifth of 250?", 50),
    ("What is 12.5% of 400?", 50),
    ("Halve 86 and then add 7.", 50),
    ("What is the total of 14, 16 and 20?", 50),
    ("What is 11 squared?", 121),
    ("How much is 2,500 plus 1,250?", 3750),
    ("What is 7 multiplied by 15?", 105),
    ("What is 120 minus 45?", 75),
    ("Divide 72 by 6 and then multiply by 5.", 60),
    ("What is the mean of 3, 9 and 12?", 8),
    ("What is a dozen times four?", 48),
    ("What is two fifths of 50?", 20),
    ("Subtract 7 from 40, then double the result.", 66),
    ("What's 250 \u00f7 10?", 25),
    ("Begin with 90, take off 30, then divide by 3.", 20),
    ("What is 1% of 700?", 7),
    ("What is fifteen plus twenty-six?", 41),
    ("Decrease 200 by 15%.", 170),
    ("A box holds 6 eggs. How many eggs are in 7 boxes?", 42),
    ("I had 50 euros and spent 18. How much is left?", 32),
]

WRITING = [
    "Write a haiku about a lighthouse.",
    "Write one sentence about a quiet library.",
    "Suggest a name for a flower shop.",
    "Write a short note thanking a teacher.",
    "Describe a dog in two sentences.",
    "Write a slogan for a swimming pool.",
    "Give me a title for a story about a missing train.",
    "Write a two-line poem about spring.",
    "Explain in one sentence why leaves fall in autumn.",
    "Write a welcome message for new club members.",
    "List three animals that live in the sea.",
    "Write a short apology for a late reply to an email.",
    "Describe the sound of rain on a roof.",
    "Write a short post announcing a bake sale.",
    "Give one tip for staying focused while studying.",
    "Write a limerick about a cat who loves cheese.",
    "Summarise the story of Little Red Riding Hood in one sentence.",
    "Write the first line of a science fiction story.",
    "Suggest three names for a puppy.",
    "Write a short get-well message for a friend.",
    "Describe a beach at sunset.",
    "Write a motto for a hiking club.",
    "Explain to a child what the wind is.",
    "Write a sentence that uses the word 'compass'.",
    "Give a one-line description of a crowded market.",
    "Write a short poem about the stars.",
    "Write a product description for a ceramic mug.",
    "Invent a name for a new ice cream flavour.",
    "Write a polite message asking a neighbour to turn the music down.",
    "Describe the taste of dark chocolate.",
]
