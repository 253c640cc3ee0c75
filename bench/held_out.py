"""The held-out cases of the quality benches.

The chat pairs were written on 2026-11-27 (session 41) in new words and a new shape
(``SESSION_41_PAIRS``, summary only); session 40's and 38's (``SESSION_40_PAIRS``,
``SESSION_38_PAIRS``) were only ever read as summaries too, and stay held out beside
them. Those of session 37, 36, 35 and 34 (``SESSION_37_PAIRS``, ``SESSION_36_PAIRS``,
``SESSION_35_PAIRS``, ``SESSION_34_PAIRS``) are tuning pairs from session 38 on: their
per-pair lines are read to tune the reply checks. Those of session 32, ``CHAT_PAIRS``, are
tuning pairs too. The tasks were written on 2026-11-26. The sets these replace were read
while changes were made (a failure once looked at is no longer held out), so they became
tuning sets: ``bench/chat_quality.py``'s ``*_PAIRS`` and ``bench/task_quality.py``'s
``TUNING_*``. Nothing in the service (prompt, parser, check or threshold) is tried on the
held-out cases, and their per-case lines are not read before a final run; once one is read
to understand a failure, write a fresh set.

The chat pairs ask in other words than the fact was told ("Who looks after my teeth?"
after "My dentist is Dr. Varga."), some without "my"; six ask about something
the user never said (the right answer says it does not know), and six tell a fact and
then its update (the update is the answer).
"""

# (told, question, answer): ``told`` is one message or a few told in turn (a fact, then its
# update); the answer must appear in the reply (case-insensitive). ``answer`` None: the
# user never said it, and the only right reply says it does not know.
# Written 2026-11-26 (session 32) in new words; per-pair lines of two of them were read in
# session 33, so they are tuning pairs now (``bench/chat_quality.py``'s ALL_TUNING_PAIRS).
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

# Written 2026-11-27 (session 41) in new words and a new shape, before any change measured on
# them: facts inside chattier messages, facts about other people, questions that ask to be
# reminded or name no owner, updates told as corrections. The held-out chat pairs from
# session 41 on (``bench/chat_quality.py --pair-set held-out``, summary only). Eighteen
# recall, six never said, six updates.
SESSION_41_PAIRS = [
    (
        "Quick one before I forget: the spare key is under the blue flowerpot.",
        "Where did I say the spare key is hidden?",
        "flowerpot",
    ),
    (
        "I've worked as a sound engineer for a theatre since 2019.",
        "Remind me what my job is.",
        "sound engineer",
    ),
    ("My flatmate Oskar grew up in Szczecin.", "Which town is Oskar from?", "Szczecin"),
    ("We named the new puppy Juniper.", "Remind me, what's the puppy called?", "Juniper"),
    ("Parents' evening at school starts at 6:15.", "When does parents' evening begin?", "6:15"),
    ("I'm allergic to hazelnuts, so watch out with recipes.", "Which nut can't I eat?", "hazelnut"),
    (
        "For my birthday my sister gave me a telescope.",
        "What present did I get from my sister?",
        "telescope",
    ),
    ("The car is on level 4 of the multistorey.", "Which level did I leave the car on?", "4"),
    (
        "My daughter plays the oboe in the school orchestra.",
        "Which instrument does my daughter play?",
        "oboe",
    ),
    ("The plumber we always call is Ravi Mistry.", "Who's our plumber?", "Ravi"),
    ("Our wedding anniversary falls in October.", "In which month is our anniversary?", "October"),
    ("I drive a battered old Land Rover.", "What vehicle do I drive?", "Land Rover"),
    ("My usual coffee is a flat white with oat milk.", "How do I take my coffee?", "flat white"),
    ("Tomorrow I fly to Reykjavik for a conference.", "Where am I flying tomorrow?", "Reykjavik"),
    (
        "Gran's Christmas cake uses prunes soaked in brandy.",
        "What does gran soak in brandy for the cake?",
        "prunes",
    ),
    ("I keep my passport in the top drawer of the desk.", "Where is my passport kept?", "drawer"),
    (
        "Mrs. Okafor next door feeds the cat when we're away.",
        "Who looks after the cat while we travel?",
        "Okafor",
    ),
    ("The gym membership costs me 34 pounds a month.", "How much do I pay for the gym?", "34"),
    # Never said: "I don't know" is the right answer.
    ("My brother teaches maths in Leeds.", "What does my brother's wife teach?", None),
    ("We have a greenhouse full of tomatoes.", "What variety of apples do we grow?", None),
    ("I ran the Berlin marathon last year.", "What was my time in the Paris marathon?", None),
    ("My landlord is Mr. Fenwick.", "What's my landlord's phone number?", None),
    ("I collect vintage postcards.", "How many stamps are in my collection?", None),
    ("Our cat sleeps on the windowsill.", "What's the name of our dog?", None),
    # A fact, then its update (a correction or a change): the update is the answer.
    (
        ("My dentist is Dr. Alvarez.", "Actually I've switched dentists, I see Dr. Mbeki now."),
        "Who is my dentist?",
        "Mbeki",
    ),
    (
        ("The team standup is at 9:30.", "From next week the standup moves to 10:15."),
        "When is the standup?",
        "10:15",
    ),
    (
        ("My phone contract is with Vodafone.", "I've changed my phone provider to Giffgaff."),
        "Which network is my phone on?",
        "Giffgaff",
    ),
    (
        ("We were going to Portugal in June.", "Change of plan: we're going to Croatia in June."),
        "Where are we going in June?",
        "Croatia",
    ),
    (
        ("I ride a red road bike.", "Someone stole the red bike, so now I ride a green folder."),
        "What colour is my bike now?",
        "green",
    ),
    (
        ("My running club meets on Mondays.", "The running club meets on Thursdays this season."),
        "Which day does my running club meet?",
        "Thursday",
    ),
]

# Written 2026-11-27 (session 40) in new words, before the changes measured on them: the
# held-out chat pairs (``bench/chat_quality.py --pair-set held-out``, which prints only the
# summary for them). Eighteen recall, six never said, six updates, as SESSION_38_PAIRS.
SESSION_40_PAIRS = [
    ("Our allotment is plot 58.", "Which plot is our allotment?", "58"),
    (
        "This autumn I'm learning to make cheese in Appenzell.",
        "Where will I study cheesemaking?",
        "Appenzell",
    ),
    ("My goddaughter is called Perpetua.", "What is my goddaughter's name?", "Perpetua"),
    ("The boiler engineer comes on Tuesday.", "What day is the boiler being serviced?", "Tuesday"),
    ("Pistachio is my favourite ice cream.", "Which ice cream flavour do I prefer?", "pistachio"),
    ("I coach water polo on Sundays.", "What sport do I coach?", "water polo"),
    ("Our narrowboat is moored in Stratford.", "Where is our narrowboat kept?", "Stratford"),
    ("My cousin Felix works as a locksmith.", "What does Felix do for a living?", "locksmith"),
    ("The bike lock code is 6280.", "How do I open my bike lock?", "6280"),
    ("My physiotherapist is Ms. Kowalczyk.", "Who treats my bad knee?", "Kowalczyk"),
    ("I brew my own ginger beer.", "Which drink do I brew at home?", "ginger beer"),
    ("My grandmother was a glazier.", "What was my grandmother's trade?", "glazier"),
    ("A walnut tree shades our patio.", "What tree gives our patio shade?", "walnut"),
    ("I sing tenor in the cathedral choir.", "Which part do I sing in the choir?", "tenor"),
    ("My wellington boots are yellow.", "What colour are my wellies?", "yellow"),
    ("Our tortoise is called Humphrey.", "What's the tortoise's name?", "Humphrey"),
    ("I learnt to ski in Bansko.", "Where did I first ski?", "Bansko"),
    ("My train to work leaves at 7:42.", "What time is my morning train?", "7:42"),
    # Never said: "I don't know" is the right answer.
    ("My brother-in-law repairs clocks.", "What does my sister-in-law do?", None),
    ("We keep three hens.", "What are our ducks called?", None),
    ("My son studies in Aberdeen.", "What is my son's email address?", None),
    ("I swim before breakfast.", "Which pool do I swim in?", None),
    ("Our kitchen has a blue tiled floor.", "What colour is our bathroom?", None),
    ("I visited Tallinn in March.", "Which hotel did I stay at in Riga?", None),
    # A fact, then its update: the update is the answer.
    (
        ("The book club meets at the library.", "The book club has moved to the tea room."),
        "Where does the book club meet?",
        "tea room",
    ),
    (
        ("My locker at the gym is 112.", "I swapped lockers at the gym, mine is 205 now."),
        "Which gym locker is mine?",
        "205",
    ),
    (
        ("My manager is Priya.", "Priya left, and my new manager is Desmond."),
        "Who is my manager?",
        "Desmond",
    ),
    (
        ("We planned to paint the shed green.", "We ended up painting the shed navy."),
        "What colour is the shed?",
        "navy",
    ),
    (
        ("The school play is on Friday.", "The school play was moved to Monday."),
        "When is the school play?",
        "Monday",
    ),
    (
        ("Our wifi network is called Nest.", "I renamed the wifi network Orchard."),
        "What is our wifi network called?",
        "Orchard",
    ),
]

# Written 2026-11-27 (session 38) in new words, before the changes measured on them: the
# held-out chat pairs (``bench/chat_quality.py --pair-set held-out``, which prints only the
# summary for them). Eighteen recall, six never said, six updates, as SESSION_37_PAIRS.
SESSION_38_PAIRS = [
    ("Our mailbox at the post office is box 71.", "Which post office box is ours?", "71"),
    (
        "In May I'm doing a bookbinding course in Lucca.",
        "Where am I learning to bind books?",
        "Lucca",
    ),
    ("My great-niece is named Ottilie.", "What's my great-niece called?", "Ottilie"),
    ("The roofer is booked for Thursday.", "Which day is the roof being mended?", "Thursday"),
    (
        "Pistachio is my favourite ice cream flavour.",
        "Which gelato flavour do I prefer?",
        "pistachio",
    ),
    ("Every Tuesday evening I go fencing.", "What sport fills my Tuesday evenings?", "fencing"),
    (
        "We spend every August in a cabin near Lillehammer.",
        "Where is our summer cabin?",
        "Lillehammer",
    ),
    ("My stepfather is a stonemason.", "What trade is my stepdad in?", "stonemason"),
    (
        "The safe in the study opens with 4419.",
        "What's the combination for the study safe?",
        "4419",
    ),
    ("My chiropodist is Ms. Haverford.", "Who looks after my feet?", "Haverford"),
    ("I brew my own ginger beer.", "Which drink do I make myself?", "ginger beer"),
    (
        "My late aunt Rosalind was a milliner.",
        "What did aunt Rosalind do for a living?",
        "milliner",
    ),
    (
        "A magnolia grows in our front garden.",
        "What kind of tree is in our front garden?",
        "magnolia",
    ),
    ("I play the double bass in a jazz trio.", "Which instrument do I play in the trio?", "bass"),
    ("My thermos flask is mustard yellow.", "What colour is the flask I take tea in?", "mustard"),
    (
        "The couple next door keep an alpaca called Dumpling.",
        "What's the neighbours' alpaca named?",
        "Dumpling",
    ),
    ("I did my law degree in Coimbra.", "In which university town did I read law?", "Coimbra"),
    (
        "Bertrand tunes my harpsichord twice a year.",
        "Who looks after the harpsichord's tuning?",
        "Bertrand",
    ),
    # Never said: "I don't know" is the right answer.
    ("My stepsister sells houses.", "What does my half-brother do for work?", None),
    ("I keep koi in a pond.", "What is my cat called?", None),
    ("My penfriend lives in Ghent.", "What is my penfriend's favourite film?", None),
    ("I do pilates on Friday mornings.", "Which studio do I do pilates at?", None),
    ("Our kitchen has a gas stove.", "What colour is our letterbox?", None),
    ("I went skiing in Andorra last winter.", "Which hotel did I stay at in Austria?", None),
    # A fact, then its update: the update is the answer.
    (
        (
            "Our quilting group meets in the church hall.",
            "The quilting group now meets at the Rose Café instead.",
        ),
        "Where does the quilting group meet?",
        "Rose",
    ),
    (
        ("My storage cage at work is number 19.", "Facilities moved me to storage cage 84."),
        "Which storage cage is mine?",
        "84",
    ),
    (
        ("My hairdresser is Mireille.", "Mireille moved away, so Tamsin cuts my hair now."),
        "Who cuts my hair?",
        "Tamsin",
    ),
    (
        ("We planned to paint the fence green.", "In the end we painted the fence ochre."),
        "What colour is the fence?",
        "ochre",
    ),
    (
        ("My son's graduation is in June.", "My son's graduation was moved to October."),
        "When does my son graduate?",
        "October",
    ),
    (
        ("Our sailing dinghy is called Puffin.", "We renamed the dinghy Albatross."),
        "What's the dinghy's name?",
        "Albatross",
    ),
]

# Written 2026-11-27 (session 37) in new words; held out until session 38, which reads their
# per-pair lines to tune the reply checks, so they are tuning pairs now (``--pair-set
# session-37``). Eighteen recall, six never said, six updates, as SESSION_36_PAIRS.
SESSION_37_PAIRS = [
    (
        "My accordion was built in Castelfidardo.",
        "What town produced my accordion?",
        "Castelfidardo",
    ),
    ("Our cellar compartment is number 38.", "Which cellar compartment belongs to us?", "38"),
    (
        "In March I'm enrolled on a mosaic workshop in Ravenna.",
        "Where will I be studying mosaics?",
        "Ravenna",
    ),
    (
        "My youngest grandson is named Alistair.",
        "Remind me what my youngest grandson is called.",
        "Alistair",
    ),
    (
        "The gutter cleaner comes on Saturday.",
        "On what day are the gutters getting cleaned?",
        "Saturday",
    ),
    ("Baklava is my favourite pastry.", "What pastry do I like best?", "baklava"),
    ("Every Thursday I play water polo.", "Which sport keeps me busy on Thursdays?", "water polo"),
    (
        "Our family rents a lodge near Hallstatt every June.",
        "Where is the June lodge?",
        "Hallstatt",
    ),
    (
        "My sister-in-law works as a pharmacist.",
        "What is my sister-in-law's profession?",
        "pharmacist",
    ),
    (
        "The key safe by the front door opens with 8035.",
        "What number unlocks the key safe?",
        "8035",
    ),
    ("My physiotherapist is Mr. Castellanos.", "Who helps me with physio?", "Castellanos"),
    ("I ferment my own kimchi.", "What do I ferment at home?", "kimchi"),
    (
        "My great-grandfather was a blacksmith.",
        "What trade did my great-grandfather follow?",
        "blacksmith",
    ),
    ("A rowan tree grows beside our gate.", "Which tree stands by our gate?", "rowan"),
    (
        "I'm the banjo player in a bluegrass group.",
        "What's my instrument in the bluegrass group?",
        "banjo",
    ),
    ("My cycling helmet is turquoise.", "What colour is my bike helmet?", "turquoise"),
    (
        "The family upstairs has a cockatoo named Pickle.",
        "What do the upstairs neighbours call their cockatoo?",
        "Pickle",
    ),
    ("I trained as a vet in Utrecht.", "Where did I do my veterinary training?", "Utrecht"),
    # Never said: "I don't know" is the right answer.
    ("My uncle drives a taxi.", "What is my aunt's line of work?", None),
    ("I keep canaries in the conservatory.", "What breed is my dog?", None),
    ("My stepbrother lives in Tallinn.", "What car does my stepbrother drive?", None),
    ("I go climbing on Wednesdays.", "Which gym do I climb at?", None),
    ("Our attic has a skylight.", "What colour is our garden shed?", None),
    ("I spent Easter in Krakow.", "Which castle did I tour in Prague?", None),
    # A fact, then its update: the update is the answer.
    (
        ("Our pub quiz is held at the Plough.", "The pub quiz switched to the Fox and Hounds."),
        "Where is the pub quiz now?",
        "Fox",
    ),
    (
        (
            "My season-ticket seat is number 112.",
            "The club moved my season-ticket seat to number 260.",
        ),
        "Which seat is my season ticket?",
        "260",
    ),
    (
        (
            "My driving instructor is Mr. Olsen.",
            "Mr. Olsen retired; my driving instructor is Ms. Adebayo now.",
        ),
        "Who teaches me to drive?",
        "Adebayo",
    ),
    (
        ("We meant to carpet the stairs in beige.", "We finally carpeted the stairs in burgundy."),
        "What colour is the stair carpet?",
        "burgundy",
    ),
    (
        (
            "My dad's retirement party is in March.",
            "My dad's retirement party was moved to November.",
        ),
        "When is dad's retirement party?",
        "November",
    ),
    (
        ("Our rowing club's boat is named Heron.", "The rowing club renamed its boat Kestrel."),
        "What is the rowing club's boat called?",
        "Kestrel",
    ),
]

# Written 2026-11-27 (session 36) in new words; held out until session 37, which reads their
# per-pair lines to tune the reply checks, so they are tuning pairs now (``--pair-set
# session-36``). Eighteen recall, six never said, six updates, as SESSION_35_PAIRS.
SESSION_36_PAIRS = [
    ("The harp I practise on was built in Galway.", "In which town was my harp made?", "Galway"),
    ("Our storage unit is number 219.", "What number is the storage unit we rent?", "219"),
    (
        "Next autumn I'm attending a woodcarving workshop in Lucerne.",
        "Which town is hosting my carving class?",
        "Lucerne",
    ),
    ("My granddaughter is called Imogen.", "What name did my granddaughter get?", "Imogen"),
    ("The piano tuner visits on Tuesday.", "Which day does the tuner come round?", "Tuesday"),
    ("Nougat is the sweet I love most.", "Which confection is my favourite?", "nougat"),
    ("On winter evenings I play curling.", "What winter sport do I take part in?", "curling"),
    ("We rent a farmhouse in Tuscany each August.", "Where is our August farmhouse?", "Tuscany"),
    (
        "My brother-in-law is an electrician.",
        "What trade is my brother-in-law in?",
        "electrician",
    ),
    ("The garage door keypad opens with 7264.", "Which digits open the garage?", "7264"),
    ("My optician is Mrs. Okonkwo.", "Who checks my eyesight?", "Okonkwo"),
    ("I pickle my own gherkins.", "What vegetable do I pickle?", "gherkin"),
    ("My great-aunt was a telegraph operator.", "What was my great-aunt's work?", "telegraph"),
    ("A cherry tree shades our patio.", "Which tree is on our patio?", "cherry"),
    ("I'm the drummer in a ceilidh band.", "What do I play in the ceilidh band?", "drum"),
    ("My wellington boots are purple.", "What colour are my wellies?", "purple"),
    ("Our neighbours' donkey is called Juniper.", "What's the donkey next door named?", "Juniper"),
    ("I studied medicine in Leuven.", "In which town did I do my medical degree?", "Leuven"),
    # Never said: "I don't know" is the right answer.
    ("My brother teaches maths.", "What subject does my sister teach?", None),
    ("I keep bees in the orchard.", "How many goats do I have?", None),
    ("My godmother lives in Bruges.", "What is my godmother's favourite flower?", None),
    ("I practise yoga on Mondays.", "Who is my yoga teacher?", None),
    ("Our hallway has a tiled floor.", "What make is our washing machine?", None),
    ("I stayed in Vilnius over New Year.", "Which gallery did I visit in Riga?", None),
    # A fact, then its update: the update is the answer.
    (
        ("The darts league plays at the Red Lion.", "The darts league has moved to the Anchor."),
        "Where does the darts league play?",
        "Anchor",
    ),
    (
        ("My desk at work is number 8.", "After the office move my desk is number 45."),
        "Which desk is mine?",
        "45",
    ),
    (
        ("My GP is Dr. Lindqvist.", "Dr. Lindqvist left the practice; my GP is now Dr. Mbeki."),
        "Who is my GP?",
        "Mbeki",
    ),
    (
        ("We planned to tile the bathroom white.", "We ended up tiling the bathroom in navy."),
        "What colour are the bathroom tiles?",
        "navy",
    ),
    (
        ("My cousin's wedding is set for May.", "My cousin moved her wedding to September."),
        "When is my cousin's wedding?",
        "September",
    ),
    (
        ("Our family calendar app is called Orbit.", "We renamed the family calendar Compass."),
        "What's the family calendar called?",
        "Compass",
    ),
]

# Written 2026-11-27 (session 35) in new words; held out until session 36, which read their
# per-pair lines to tune the reply checks, so they are tuning pairs now (``--pair-set
# session-35``). Eighteen recall, six never said, six updates, as SESSION_34_PAIRS.
SESSION_35_PAIRS = [
    ("My canoe is moored at Lochinver.", "Where do I keep my boat?", "Lochinver"),
    ("Our beach hut is number 73.", "Which hut on the beach is ours?", "73"),
    (
        "I'm doing a glassblowing course in Murano next month.",
        "Where will I learn to blow glass?",
        "Murano",
    ),
    ("My nephew's name is Crispin.", "What's my nephew called?", "Crispin"),
    ("The chimney sweep is booked for Thursday.", "When is the sweep coming?", "Thursday"),
    ("Marzipan is my favourite sweet.", "Which treat do I enjoy most?", "marzipan"),
    ("I umpire cricket games in the summer.", "Which sport do I umpire?", "cricket"),
    ("Our holiday flat is in Dubrovnik.", "Where is the flat we go to on holiday?", "Dubrovnik"),
    ("My son-in-law works as a paramedic.", "What is my son-in-law's job?", "paramedic"),
    ("The garden gate padlock opens with 3052.", "What's the code for the gate padlock?", "3052"),
    ("My dentist is Dr. Varga.", "Who looks after my teeth?", "Varga"),
    ("I make my own marmalade.", "What preserve do I make myself?", "marmalade"),
    ("My grandad was a cooper.", "What was my grandfather's craft?", "cooper"),
    ("There is an olive tree in our courtyard.", "What tree stands in our courtyard?", "olive"),
    ("I play the oboe in a wind quintet.", "Which instrument do I play in the quintet?", "oboe"),
    ("My raincoat is bright green.", "What colour is the coat I wear in the rain?", "green"),
    ("My neighbour's goat is called Bramble.", "What is the goat next door called?", "Bramble"),
    ("I learnt to sail in Kiel.", "Where did I learn sailing?", "Kiel"),
    # Never said: "I don't know" is the right answer.
    ("My aunt breeds horses.", "What does my uncle do for work?", None),
    ("I own two ferrets.", "What are my guinea pigs called?", None),
    ("My daughter moved to Kilkenny.", "What is my daughter's phone number?", None),
    ("I go running at dawn.", "Which shoes do I run in?", None),
    ("Our living room has a wood stove.", "What colour is our front door?", None),
    ("I spent a week in Ljubljana in May.", "Which restaurant did I eat at in Zagreb?", None),
    # A fact, then its update: the update is the answer.
    (
        (
            "Our knitting circle meets at the community centre.",
            "The knitting circle now meets in the church crypt.",
        ),
        "Where does the knitting circle meet?",
        "crypt",
    ),
    (
        ("My parking space is bay 14.", "They gave me a new parking space: bay 31."),
        "Which bay do I park in?",
        "31",
    ),
    (
        ("My landlord is Mr. Haddad.", "The flat was sold, and my landlord is now Mrs. Quennell."),
        "Who is my landlord?",
        "Quennell",
    ),
    (
        ("We were going to paint the porch grey.", "In the end we painted the porch terracotta."),
        "What colour is our porch?",
        "terracotta",
    ),
    (
        ("My sister's visit is planned for July.", "My sister postponed her visit to October."),
        "When is my sister visiting?",
        "October",
    ),
    (
        ("Our team's group chat is called Lunchbox.", "We renamed the team chat to Beehive."),
        "What is the team chat called?",
        "Beehive",
    ),
]

# Written 2026-11-26 (session 34) in new words, before the changes measured on them. Only
# their summaries were read until session 36; from then on they are tuning pairs like
# SESSION_35_PAIRS (``--pair-set session-34``). Eighteen recall, six never said, six updates.
SESSION_34_PAIRS = [
    ("My violin was made in Cremona.", "Where does my violin come from?", "Cremona"),
    ("Our caravan is parked on pitch 41.", "Which pitch is the caravan on?", "41"),
    (
        "I'm taking pottery lessons in Oaxaca this spring.",
        "Where am I learning pottery?",
        "Oaxaca",
    ),
    ("My godson is named Leopold.", "What's my godson called?", "Leopold"),
    ("The window cleaner is due on Wednesday.", "Which day will the windows be done?", "Wednesday"),
    ("Shortbread is my favourite biscuit.", "Which biscuit do I like most?", "shortbread"),
    ("I referee hockey matches at weekends.", "What game do I referee?", "hockey"),
    ("Our ski chalet is in Zermatt.", "Where is the chalet we own?", "Zermatt"),
    ("My stepdaughter is training as a midwife.", "What is my stepdaughter becoming?", "midwife"),
    ("The safe's combination is 9147.", "Which number opens the safe?", "9147"),
    ("My solicitor is Mr. Ferreira.", "Who handles my legal affairs?", "Ferreira"),
    ("I bake sourdough every Saturday.", "What kind of bread do I bake?", "sourdough"),
    ("My great-uncle was a lighthouse keeper.", "What did my great-uncle do?", "lighthouse"),
    ("We have a fig tree by the back door.", "What grows by our back door?", "fig"),
    ("I play the bassoon in the town band.", "What do I play in the town band?", "bassoon"),
    ("My umbrella is yellow with white spots.", "What colour is my umbrella?", "yellow"),
    (
        "My flatmate's tortoise is called Admiral.",
        "What is the flatmate's tortoise named?",
        "Admiral",
    ),
    ("I did my apprenticeship in Dortmund.", "Where did I train as an apprentice?", "Dortmund"),
    # Never said: "I don't know" is the right answer.
    ("My father repairs clocks.", "What does my mother do for a living?", None),
    ("I keep three chickens.", "What are my ducks called?", None),
    ("My cousin moved to Perth.", "When is my cousin's birthday?", None),
    ("I swim every Tuesday.", "Who do I go swimming with?", None),
    ("Our bathroom has a walk-in shower.", "What colour are our kitchen tiles?", None),
    ("I visited Lisbon in April.", "Which museum did I see in Madrid?", None),
    # A fact, then its update: the update is the answer.
    (
        ("Our choir rehearses in the school hall.", "Choir practice has moved to the town annex."),
        "Where does the choir rehearse?",
        "annex",
    ),
    (
        ("My locker at the pool is number 12.", "I swapped lockers; mine is number 58 now."),
        "Which locker is mine at the pool?",
        "58",
    ),
    (
        ("My manager is Greta.", "Greta retired, so my manager is Tobias now."),
        "Who is my manager?",
        "Tobias",
    ),
    (
        ("We're getting a golden retriever.", "We changed our minds and got a beagle instead."),
        "Which breed of dog did we get?",
        "beagle",
    ),
    (
        ("My flight home is on Sunday.", "The airline moved my flight home to Monday."),
        "When do I fly home?",
        "Monday",
    ),
    (
        ("Our wifi network is called Attic.", "I renamed our wifi network to Lantern."),
        "What is our wifi network called?",
        "Lantern",
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

# (task, exact result). Written in session 33 after the reader was changed on the misses of
# the session's first fresh set (now bench/task_quality.py's SESSION_33_ARITHMETIC); only
# the summary line of a run on them is read.
ARITHMETIC = [
    ("Add 48 and 27.", 75),
    ("What is 60 percent of 45?", 27),
    ("What's 13 multiplied by 7?", 91),
    ("Take 56 from 203.", 147),
    ("How much is two thirds of 36?", 24),
    ("Double 45, then subtract 15.", 75),
    ("What is 225 divided by 15?", 15),
    ("What is 9 squared minus 1?", 80),
    ("What's the sum of 33, 44 and 55?", 132),
    ("What number is 14 more than 86?", 100),
    ("Find 5% of 360.", 18),
    ("Multiply 14 by 14.", 196),
    ("How much is half of 250?", 125),
    ("What is forty-five divided by five?", 9),
    ("Start from 500, subtract 150, then divide by 7.", 50),
    ("What is the square root of 169?", 13),
    ("Increase 250 by 20%.", 300),
    ("What is 1.5 times 30?", 45),
    ("What is 8 plus 9 plus 10 plus 11?", 38),
    ("Multiply 7 by 6, then add 8, then halve the result.", 25),
    ("How much is 3 to the power of 4?", 81),
    ("What is one tenth of 730?", 73),
    ("What is the mean of 6, 10 and 14?", 10),
    ("What is 350 minus 125?", 225),
    ("What is three dozen minus 6?", 30),
    ("Divide 1,200 by 8.", 150),
    ("Each bag holds 9 oranges. How many oranges are in 6 bags?", 54),
    ("A bus had 35 passengers and 12 got off. How many are still on the bus?", 23),
    ("Pens cost 4 euros each. How much do 9 pens cost?", 36),
    ("Lena reads 15 pages a day. How many pages does she read in 6 days?", 90),
]

WRITING = [
    "Write a haiku about snow on a mountain.",
    "Compose a two-sentence bedtime story about an owl.",
    "Suggest a name for a bicycle repair shop.",
    "Write a thank-you note to a neighbour who watered my plants.",
    "Describe a busy train station in one sentence.",
    "Write a tagline for a bakery that opens at dawn.",
    "Give me three ideas for a rainy Sunday.",
    "Write a short poem about a river.",
    "Explain in one sentence what a volcano is.",
    "Write an invitation to a birthday picnic.",
    "Name three fruits that are yellow.",
    "Write a short message congratulating a colleague on a promotion.",
    "Describe the smell of fresh bread.",
    "Write a headline for a story about a lost kitten found safe.",
    "Give one tip for sleeping better.",
    "Write a riddle about the moon.",
    "Summarise the fable of the tortoise and the hare in one sentence.",
    "Write the opening line of a mystery novel.",
    "Suggest a name for a goldfish.",
    "Write a short reminder to bring umbrellas on the school trip.",
    "Describe an autumn forest in two sentences.",
    "Write a motto for a chess club.",
    "Explain to a child why the sky is blue.",
    "Use the word 'lantern' in a sentence.",
    "Describe a snowy village at night.",
    "Write a short poem about coffee.",
    "Write a product description for a wool scarf.",
    "Invent a name for a board game about pirates.",
    "Write a polite email asking for a meeting next week.",
    "Describe the feeling of the first warm day of spring.",
]
